package quickbooks

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// voided reports whether QuickBooks voided the invoice: its status says
// so, or (as QuickBooks Online writes a void) its amounts are zeroed and
// its note is "Voided".
func voided(inv *invoice) bool {
	return inv.Status == "Voided" || strings.HasPrefix(inv.PrivateNote, "Voided") && isZero(inv.TotalAmt)
}

// paidOff reports whether a live invoice with something to pay has
// nothing left to pay.
func paidOff(inv *invoice) bool {
	return !voided(inv) && isZero(inv.Balance) && !isZero(inv.TotalAmt)
}

func isZero(n json.Number) bool {
	s, err := xero.Decimal2(string(n))
	return err == nil && strings.Trim(s, "-0.") == ""
}

// status maps an invoice to ours.
func status(inv *invoice, total, due string) string {
	switch {
	case voided(inv):
		return "void"
	case paidOff(inv):
		return "paid"
	case due != total && strings.Trim(due, "-0.") != "":
		return "partially_paid"
	}
	return "issued"
}

// settlement is the latest payment linked to an invoice among payments,
// nil when none is known.
func settlement(inv *invoice, payments map[string]*payment) *payment {
	var last *payment
	var lastAt time.Time
	for _, l := range inv.LinkedTxn {
		p := payments[l.TxnID]
		if l.TxnType != "Payment" || p == nil || p.Status == "Deleted" {
			continue
		}
		at := paidAt(p)
		if last == nil || !at.Before(lastAt) {
			last, lastAt = p, at
		}
	}
	return last
}

// paidAt is when a payment was recorded: its creation in QuickBooks, else
// its transaction date.
func paidAt(p *payment) time.Time {
	if t, err := qbTime(p.MetaData.CreateTime); err == nil && !t.IsZero() {
		return t
	}
	t, _ := time.Parse(time.DateOnly, p.TxnDate)
	return t
}

// settledVia names the rail of the payment that settled an invoice: the
// words of its payment method, reference and note; an invoice paid off by
// a credit memo alone says so.
func (a *Adapter) settledVia(inv *invoice, p *payment) string {
	if p == nil {
		for _, l := range inv.LinkedTxn {
			if l.TxnType == "CreditMemo" {
				return "credit_note"
			}
		}
		return "bank_transfer"
	}
	text := p.PaymentRefNum + " " + p.PrivateNote
	if p.PaymentMethodRef != nil {
		text = p.PaymentMethodRef.Name + " " + text
	}
	return a.rails.Of(text)
}

// invoiceJSON translates an invoice, given the payments it may link to.
func (a *Adapter) invoiceJSON(ctx context.Context, t practice.Tenant, inv *invoice, payments map[string]*payment) (json.RawMessage, error) {
	v, err := a.invoice(ctx, t, inv, payments)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&v)
}

func (a *Adapter) invoice(ctx context.Context, t practice.Tenant, inv *invoice, payments map[string]*payment) (practice.Invoice, error) {
	bad := func(err error) (practice.Invoice, error) {
		return practice.Invoice{}, upstream.Malformed(a.c.Label(), "invoice "+inv.ID, err)
	}
	if !digitsOnly(inv.ID) {
		return bad(fmt.Errorf("Id %q is not a QuickBooks id", inv.ID))
	}
	total, err := xero.Decimal2(string(inv.TotalAmt))
	if err != nil {
		return bad(err)
	}
	due, err := xero.Decimal2(string(inv.Balance))
	if err != nil {
		return bad(err)
	}
	// A company keeps one home currency, which QuickBooks names on every
	// invoice of a multicurrency company and leaves out otherwise.
	currency := inv.CurrencyRef.Value
	if currency == "" {
		currency = "USD"
	}
	updated, err := qbTime(inv.MetaData.LastUpdatedTime)
	if err != nil {
		return bad(err)
	}
	created, err := qbTime(inv.MetaData.CreateTime)
	if err != nil {
		return bad(err)
	}
	if updated.IsZero() {
		return bad(fmt.Errorf("no MetaData.LastUpdatedTime"))
	}
	issued, err := qbDate(inv.TxnDate)
	if err != nil {
		return bad(err)
	}
	dueOn, err := qbDate(inv.DueDate)
	if err != nil {
		return bad(err)
	}
	st := status(inv, total, due)
	out := practice.Invoice{
		ID: invoiceID(inv.ID), Object: "invoice", Number: practice.Known(inv.DocNumber), Status: st,
		Total:     practice.Money{Amount: total, Currency: currency},
		AmountDue: practice.Money{Amount: due, Currency: currency},
		IssuedOn:  issued, DueOn: dueOn, CreatedAt: practice.KnownAt(created), UpdatedAt: updated, Version: practice.VersionAt(updated),
	}
	if st == "paid" {
		p := settlement(inv, payments)
		paid := updated
		if p != nil {
			if at := paidAt(p); !at.IsZero() {
				paid = at
			}
		}
		out.PaidAt = &paid
		out.SettledVia = a.settledVia(inv, p)
	}
	client, err := a.client(ctx, t, inv.CustomerRef)
	if err != nil {
		return practice.Invoice{}, err
	}
	out.Client = client
	// The client and the settlement are read apart from the invoice: a
	// change of either under the same LastUpdatedTime moves the version
	// (practice/stamps).
	seen, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Invoices, ID: out.ID, Content: &out, Vendor: updated})
	if err != nil {
		return practice.Invoice{}, err
	}
	out.UpdatedAt, out.Version = seen.At, seen.Version()
	return out, nil
}

// client is the practice's client id for a QuickBooks customer, null when
// the firm's records system has none certainly (or linking is off): the
// company's customers are not the practice's clients. By the customer's
// id (an external key the records system may keep) and its display name
// alone, which QuickBooks keeps unique.
func (a *Adapter) client(ctx context.Context, t practice.Tenant, customer ref) (*string, error) {
	if a.clients == nil || customer.Value == "" {
		return nil, nil
	}
	l, err := a.clients.LinkClient(ctx, t, linking.Candidate{Ref: customer.Value, External: customer.Value, Name: customer.Name})
	if err != nil {
		return nil, fmt.Errorf("quickbooks: client of customer %s: %w", customer.Value, err)
	}
	return l.Ref(), nil
}
