package xero

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"sort"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// rail is a word that names a collection rail in a payment's reference or
// account.
type rail struct{ word, name string }

var defaultRails = map[string]string{
	"stripe":         "stripe",
	"gocardless":     "gocardless",
	"go cardless":    "gocardless",
	"direct debit":   "direct_debit",
	"card":           "card",
	"paypal":         "paypal",
	"ach":            "ach",
	"cheque":         "check",
	"check":          "check",
	"bacs":           "bank_transfer",
	"faster payment": "bank_transfer",
	"transfer":       "bank_transfer",
}

// Rails names the collection rail of a payment by the words of its
// reference and account, for every ledger that reads them (Xero's, Xero
// Practice Manager's invoices).
type Rails []rail

// NewRails is the default words with cfg's over them.
func NewRails(cfg map[string]string) (Rails, error) { return newRails(cfg) }

// Of is the rail named in text, bank_transfer when none is.
func (r Rails) Of(text string) string {
	text = strings.ToLower(text)
	for _, w := range r {
		if containsWord(text, w.word) {
			return w.name
		}
	}
	return "bank_transfer"
}

// newRails orders the words longest first, so "direct debit card" is not
// taken for "card".
func newRails(cfg map[string]string) ([]rail, error) {
	m := map[string]string{}
	for k, v := range defaultRails {
		m[k] = v
	}
	for k, v := range cfg {
		if strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("xero: settlement_rails needs a word and a rail name, got %q: %q", k, v)
		}
		m[strings.ToLower(strings.TrimSpace(k))] = v
	}
	rails := make([]rail, 0, len(m))
	for k, v := range m {
		rails = append(rails, rail{k, v})
	}
	sort.Slice(rails, func(i, j int) bool {
		if len(rails[i].word) != len(rails[j].word) {
			return len(rails[i].word) > len(rails[j].word)
		}
		return rails[i].word < rails[j].word
	})
	return rails, nil
}

// status maps Xero's status codes to ours.
func status(inv *invoice) (string, error) {
	switch inv.Status {
	case "DRAFT":
		return "draft", nil
	case "SUBMITTED":
		return "awaiting_approval", nil
	case "AUTHORISED":
		if (positive(inv.AmountPaid) || positive(inv.AmountCredited)) && positive(inv.AmountDue) {
			return "partially_paid", nil
		}
		return "issued", nil
	case "PAID":
		return "paid", nil
	case "VOIDED", "DELETED":
		return "void", nil
	}
	return "", fmt.Errorf("status %q is not one Xero publishes", inv.Status)
}

// settledVia names the rail of the payment that settled a paid invoice:
// the latest payment, by the words of its reference, account and batch;
// an invoice paid off by credit notes, prepayments or overpayments alone
// says so.
func (a *Adapter) settledVia(inv *invoice) string {
	var last *payment
	var lastAt time.Time
	for i := range inv.Payments {
		p := &inv.Payments[i]
		if p.Status == "DELETED" {
			continue
		}
		at, _ := xeroTime(p.Date)
		if last == nil || !at.Before(lastAt) {
			last, lastAt = p, at
		}
	}
	if last == nil {
		switch {
		case inv.CreditNotes > 0:
			return "credit_note"
		case inv.Prepayments > 0:
			return "prepayment"
		case inv.Overpayments > 0:
			return "overpayment"
		}
		return "bank_transfer"
	}
	text := last.Reference
	if last.Account != nil {
		text += " " + last.Account.Name + " " + last.Account.Code
	}
	return Rails(a.rails).Of(text)
}

// containsWord finds word in text at word boundaries, so "ach" is not
// found in "coaching".
func containsWord(text, word string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !isAlnum(text[start-1])) && (end == len(text) || !isAlnum(text[end])) {
			return true
		}
		i = start + 1
	}
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// invoiceJSON translates a Xero invoice.
func (a *Adapter) invoiceJSON(ctx context.Context, t practice.Tenant, inv *invoice) (json.RawMessage, error) {
	v, err := a.invoice(ctx, t, inv)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&v)
}

// invoicesJSON translates a page's worth of invoices; one that cannot be
// read is its own alone.
func (a *Adapter) invoicesJSON(ctx context.Context, t practice.Tenant, invs []paging.Found[invoice]) ([]json.RawMessage, error) {
	return paging.Each(ctx, 1, len(invs), func(ctx context.Context, i int) (json.RawMessage, error) {
		inv := &invs[i].Item
		raw, err := a.invoiceJSON(ctx, t, inv)
		if err != nil && isUUID(inv.InvoiceID) {
			return nil, practice.Unusable(practice.Invoices, "inv_"+inv.InvoiceID, "the invoice", err)
		}
		return raw, err
	})
}

func (a *Adapter) invoice(ctx context.Context, t practice.Tenant, inv *invoice) (practice.Invoice, error) {
	bad := func(err error) (practice.Invoice, error) {
		return practice.Invoice{}, upstream.Malformed(a.c.Label(), "invoice "+inv.InvoiceID, err)
	}
	if !isUUID(inv.InvoiceID) {
		return bad(fmt.Errorf("InvoiceID %q is not a UUID", inv.InvoiceID))
	}
	st, err := status(inv)
	if err != nil {
		return bad(err)
	}
	total, err := decimal2(inv.Total)
	if err != nil {
		return bad(err)
	}
	due, err := decimal2(inv.AmountDue)
	if err != nil {
		return bad(err)
	}
	if inv.CurrencyCode == "" {
		return bad(fmt.Errorf("no CurrencyCode"))
	}
	updated, err := xeroTime(inv.UpdatedDateUTC)
	if err != nil {
		return bad(err)
	}
	dated, err := xeroTime(inv.Date)
	if err != nil {
		return bad(err)
	}
	dueOn, err := xeroDate(inv.DueDate)
	if err != nil {
		return bad(err)
	}
	out := practice.Invoice{
		ID: "inv_" + inv.InvoiceID, Object: "invoice", Number: practice.Known(inv.InvoiceNumber), Status: st,
		Total:     practice.Money{Amount: total, Currency: inv.CurrencyCode},
		AmountDue: practice.Money{Amount: due, Currency: inv.CurrencyCode},
		// Xero publishes no creation time on an invoice: created_at is
		// its date, null when it has none.
		DueOn: dueOn, CreatedAt: practice.KnownAt(dated), UpdatedAt: updated, Version: practice.VersionAt(updated),
	}
	if st != "draft" && st != "awaiting_approval" && !dated.IsZero() {
		out.IssuedOn = dated.Format(time.DateOnly)
	}
	if st == "paid" {
		paid, err := xeroTime(inv.FullyPaidOnDate)
		if err != nil {
			return bad(err)
		}
		if paid.IsZero() {
			paid = updated
		}
		out.PaidAt = &paid
		out.SettledVia = a.settledVia(inv)
	}
	if out.Client, err = a.client(ctx, t, inv.Contact); err != nil {
		return practice.Invoice{}, err
	}
	// The client is the records system's, linked apart from the invoice:
	// a link found later changes it under the same UpdatedDateUTC, and
	// the stamp moves the version then (practice/stamps).
	seen, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Invoices, ID: out.ID, Content: &out, Vendor: updated})
	if err != nil {
		return practice.Invoice{}, err
	}
	out.UpdatedAt, out.Version = seen.At, seen.Version()
	return out, nil
}

// client is the practice's client id for a Xero contact, null when the
// firm's records system has none certainly (or linking is off): Xero's
// contacts are not the practice's clients.
func (a *Adapter) client(ctx context.Context, t practice.Tenant, c contact) (*string, error) {
	if a.clients == nil || c.ContactID == "" {
		return nil, nil
	}
	// By the contact id and the name alone: Xero keeps a contact's name
	// unique in the organisation, not its email or tax number.
	l, err := a.clients.LinkClient(ctx, t, linking.Candidate{Ref: c.ContactID, External: c.ContactID, Name: c.Name})
	if err != nil {
		return nil, fmt.Errorf("xero: client of contact %s: %w", c.ContactID, err)
	}
	return l.Ref(), nil
}
