package karbon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Karbon's billing as the firm's ledger: GET /v3/Invoices and
// /v3/Invoices/{InvoiceKey} with its payments, and /v3/Payments/{PaymentKey}
// for how a payment was made. Karbon publishes invoices from their
// approval on: drafts and invoices awaiting approval are not in its API,
// so an invoice first appears issued.
//
// Karbon's description lets an invoice list be filtered by InvoiceStatus
// alone, ordered by InvoiceDate, CreatedAt, UpdatedAt or InvoiceNumber,
// and paged by $top and $skip (its next links). A full pass reads them in
// creation order, which an edit does not reorder; what changed since a
// time is read most recently updated first, ending at the first invoice
// updated before it. Deletions are not told by the Invoice webhook (it
// publishes Updated alone) nor by any list: the read model's
// reconciliation finds them, an invoice it no longer lists being removed
// only on Karbon's 404 for it.

// invoice is Karbon's BillingInvoice, and with Payments its
// BillingInvoiceWithPayment; amounts are JSON numbers, read as decimals.
type invoice struct {
	InvoiceKey     string
	InvoiceNumber  string
	TotalAmountDue jsontext.Value
	InvoiceTotal   jsontext.Value
	InvoiceDate    string
	PaymentDueDate string
	UpdatedAt      string
	CurrencyCode   string
	InvoiceStatus  string
	Client         *struct {
		ClientKey  string
		ClientType string
		Name       string
	}
	Payments []invoicePayment
}

// invoicePayment is one entry of an invoice's Payments.
type invoicePayment struct {
	PaymentKey  string
	PaymentType string // ManualPayment, ManualPaymentReversed or Payment
	PaymentDate string
}

// payment is Karbon's BillingPayment, the part that says how it was made.
type payment struct {
	PaymentKey    string
	PaymentType   string
	PaymentMethod string
	KarbonPayment *struct {
		CardType    string
		CardFunding string
	}
}

// creationOrder is the order of a full pass: an invoice keeps its place
// when it is edited, so paging by offset neither skips nor repeats one
// for an edit made meanwhile.
const creationOrder = "CreatedAt"

// latestFirst is the order of a read of what changed since a time.
const latestFirst = "UpdatedAt desc"

func (a *Adapter) listInvoices(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	since := f.UpdatedSince
	w := paging.Walk[invoice]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[invoice], error) {
			return a.fetchInvoices(ctx, since, token)
		},
		ID: func(inv invoice) string { return inv.InvoiceKey },
		Convert: func(ctx context.Context, invs []paging.Found[invoice]) ([]json.RawMessage, error) {
			return paging.Each(ctx, a.cfg.DetailConcurrency, len(invs), func(ctx context.Context, i int) (json.RawMessage, error) {
				rec, err := a.invoiceRecord(ctx, invs[i].Item)
				if errors.Is(err, practice.ErrNotFound) {
					// Deleted since it was listed: the reconciliation
					// confirms it gone.
					return nil, nil
				}
				if err != nil {
					return nil, err
				}
				return practice.Marshal(&rec)
			})
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// fetchInvoices reads one Karbon page of invoices. With since set, the
// first page asks for the most recently updated first and the listing ends
// at the first invoice updated before since; whether a page is in that
// order is read from its link, so a cursor resumes in the order it began.
func (a *Adapter) fetchInvoices(ctx context.Context, since time.Time, token string) (paging.VendorPage[invoice], error) {
	var page paging.VendorPage[invoice]
	const path = "/v3/Invoices"
	_, first, err := pageLink(path, token)
	if err != nil {
		return page, err
	}
	order := linkOrder(token)
	if first {
		order = creationOrder
		if !since.IsZero() {
			order = latestFirst
		}
	}
	var q url.Values
	if first {
		q = url.Values{"$orderby": {order}}
	}
	items, next, err := odataPage[invoice](ctx, a, path, "invoices", q, token, a.cfg.PageSize)
	if err != nil {
		return page, err
	}
	for _, inv := range items {
		if !validKey(inv.InvoiceKey) {
			return page, upstream.Malformed(a.c.Label(), "invoice list", fmt.Errorf("invoice key %q", inv.InvoiceKey))
		}
		if order == latestFirst && !since.IsZero() {
			updated, err := karbonTime(inv.UpdatedAt)
			if err != nil {
				return page, upstream.Malformed(a.c.Label(), "invoice list", err)
			}
			if updated.Before(since) {
				// Every invoice after this one was updated earlier still.
				return page, nil
			}
		}
		page.Items = append(page.Items, inv)
	}
	page.Next = next
	return page, nil
}

func (a *Adapter) getInvoice(ctx context.Context, key string) (json.RawMessage, error) {
	inv, err := a.readInvoice(ctx, key)
	if err != nil {
		return nil, err
	}
	rec, err := a.invoiceRecord(ctx, inv)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&rec)
}

// readInvoice reads one invoice with its payments.
func (a *Adapter) readInvoice(ctx context.Context, key string) (invoice, error) {
	var inv invoice
	if err := a.getJSON(ctx, "/v3/Invoices/"+url.PathEscape(key)+"?$expand=Payments", "invoice", &inv); err != nil {
		if errors.Is(err, practice.ErrNotFound) {
			return inv, notFound(practice.Invoices, "inv_"+key)
		}
		return inv, err
	}
	if inv.InvoiceKey != key {
		return inv, upstream.Malformed(a.c.Label(), "invoice "+key, fmt.Errorf("the answer is invoice %q", inv.InvoiceKey))
	}
	return inv, nil
}

// invoiceRecord translates a Karbon invoice; a paid one's settlement is
// read from its payments. An invoice, or a payment of it, that cannot be
// read is that invoice's alone (practice.UnusableError).
func (a *Adapter) invoiceRecord(ctx context.Context, inv invoice) (practice.Invoice, error) {
	bad := func(err error) (practice.Invoice, error) {
		return practice.Invoice{}, practice.Unusable(practice.Invoices, "inv_"+inv.InvoiceKey, "the invoice",
			upstream.Malformed(a.c.Label(), "invoice "+inv.InvoiceKey, err))
	}
	total, err := decimalOf(inv.InvoiceTotal)
	if err != nil {
		return bad(err)
	}
	due, err := decimalOf(inv.TotalAmountDue)
	if err != nil {
		return bad(err)
	}
	issued, err := karbonDate(inv.InvoiceDate)
	if err != nil {
		return bad(err)
	}
	dueOn, err := karbonDate(inv.PaymentDueDate)
	if err != nil {
		return bad(err)
	}
	updated, err := karbonTime(inv.UpdatedAt)
	if err != nil || updated.IsZero() {
		return bad(fmt.Errorf("UpdatedAt %q", inv.UpdatedAt))
	}
	status, err := invoiceStatus(inv.InvoiceStatus, total, due)
	if err != nil {
		return bad(err)
	}
	if status == "void" {
		// Nothing is owed on a voided invoice, whatever Karbon left in
		// TotalAmountDue: as every other ledger and the demo records say.
		due = new(big.Rat)
	}
	currency := strings.ToUpper(strings.TrimSpace(inv.CurrencyCode))
	if len(currency) != 3 {
		return bad(fmt.Errorf("CurrencyCode %q", inv.CurrencyCode))
	}
	rec := practice.Invoice{ID: "inv_" + inv.InvoiceKey, Object: "invoice", Number: practice.Known(inv.InvoiceNumber), Status: status,
		Total:     practice.Money{Amount: amount2(total), Currency: currency},
		AmountDue: practice.Money{Amount: amount2(due), Currency: currency},
		IssuedOn:  issued, DueOn: dueOn, UpdatedAt: updated, Version: practice.VersionAt(updated)}
	if inv.Client != nil {
		if ref, ok := refFromClientType(inv.Client.ClientType, inv.Client.ClientKey); ok {
			if rec.Client, err = a.billed(ctx, ref, inv.Client.Name); err != nil {
				return practice.Invoice{}, err
			}
		}
	}
	// Karbon publishes no creation time on an invoice: it is the invoice
	// date, or the last update when that comes first (an invoice dated
	// ahead), and null for an invoice without a date.
	if d, err := karbonTime(inv.InvoiceDate); err == nil && !d.IsZero() {
		if updated.Before(d) {
			d = updated
		}
		rec.CreatedAt = &d
	}
	if status == "paid" {
		s, err := a.settlement(ctx, inv)
		if err != nil {
			return practice.Invoice{}, err
		}
		rec.SettledVia = s.Via
		paidAt := updated
		if !s.At.IsZero() {
			paidAt = s.At
		}
		rec.PaidAt = &paidAt
	}
	// The client, and how a paid invoice was settled, are read apart
	// from the invoice: a change of either under the same UpdatedAt
	// moves the version (practice/stamps).
	seen, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Invoices, ID: rec.ID, Content: &rec, Vendor: updated})
	if err != nil {
		return practice.Invoice{}, err
	}
	rec.UpdatedAt, rec.Version = seen.At, seen.Version()
	return rec, nil
}

// billed is the practice's client an invoice bills. The records adapter
// keeping its practice's invoices names the Karbon client itself. Karbon's
// billing as the ledger asks the firm's records system, whichever it is
// when asked: the same Karbon practice's answers the Karbon client by its
// id (the candidate's Account), another its own client by linking's rule
// (the name alone: Karbon's invoice carries no other key of the client),
// and null when it has none certainly, or when linking is off. Never a
// Karbon id that the firm's /v1/clients would answer 404 to.
func (a *Adapter) billed(ctx context.Context, ref clientRef, name string) (*string, error) {
	if a.role == "records" {
		return practice.Known(ref.id()), nil
	}
	if a.clients == nil {
		return nil, nil
	}
	l, err := a.clients.LinkClient(ctx, a.tenant(), linking.Candidate{Ref: ref.id(), Name: name, Account: a.c.BudgetAccount()})
	if err != nil {
		return nil, fmt.Errorf("karbon: client of billed client %s: %w", ref.id(), err)
	}
	return l.Ref(), nil
}

// invoiceStatus maps Karbon's InvoiceStatus onto ours. Approved (final,
// not yet sent), AwaitingPayment (sent) and Exported (handed to the
// firm's accounting system) are issued, partially paid or paid by what is
// still due; Paid is paid and Voided void.
func invoiceStatus(s string, total, due *big.Rat) (string, error) {
	switch s {
	case "Voided":
		return "void", nil
	case "Paid":
		return "paid", nil
	case "Approved", "AwaitingPayment", "Exported":
		switch {
		case due.Sign() <= 0 && total.Sign() > 0:
			return "paid", nil
		case due.Cmp(total) < 0:
			return "partially_paid", nil
		}
		return "issued", nil
	}
	return "", fmt.Errorf("InvoiceStatus %q is not one Karbon publishes", s)
}

// settlement is how a paid invoice was settled, kept in the state store
// for as long as the invoice is not updated, so that its payments are read
// once.
type settlement struct {
	Updated string    `json:"u"`
	Via     string    `json:"v"`
	At      time.Time `json:"a,omitzero"`
}

// settlement reads how a paid invoice was settled: its latest payment not
// reversed, and how that payment was made. An invoice marked paid with no
// payment in Karbon settles as other.
func (a *Adapter) settlement(ctx context.Context, inv invoice) (settlement, error) {
	key := "karbon/settlement/" + a.tenant().String() + "/" + inv.InvoiceKey
	if raw, err := a.state.Last(ctx, key); err != nil {
		return settlement{}, fmt.Errorf("karbon: settlement of invoice %s: %w", inv.InvoiceKey, err)
	} else if raw != nil {
		var s settlement
		if json.Unmarshal(raw, &s) == nil && s.Updated == inv.UpdatedAt {
			return s, nil
		}
	}
	if inv.Payments == nil {
		// A list row: the payments come with the invoice read alone.
		full, err := a.readInvoice(ctx, inv.InvoiceKey)
		if err != nil {
			return settlement{}, err
		}
		inv.Payments = full.Payments
	}
	s := settlement{Updated: inv.UpdatedAt, Via: "other"}
	var last *invoicePayment
	for i := range inv.Payments {
		p := &inv.Payments[i]
		if p.PaymentType == "ManualPaymentReversed" || !validKey(p.PaymentKey) {
			continue
		}
		at, err := time.Parse(time.DateOnly, p.PaymentDate)
		if err != nil {
			return settlement{}, practice.Unusable(practice.Invoices, "inv_"+inv.InvoiceKey, "its payments",
				upstream.Malformed(a.c.Label(), "payments of invoice "+inv.InvoiceKey, err))
		}
		if last == nil || !at.Before(s.At) {
			last, s.At = p, at
		}
	}
	if last != nil {
		var p payment
		if err := a.getJSON(ctx, "/v3/Payments/"+url.PathEscape(last.PaymentKey), "payment", &p); err != nil {
			// The invoice is there; how it was paid cannot be told. Not
			// made up (its rail), and not gone either (a payment's 404 is
			// no invoice's): left as last known, until Karbon answers.
			return settlement{}, practice.Unusable(practice.Invoices, "inv_"+inv.InvoiceKey, "its payment", err)
		}
		s.Via = a.paymentRail(p)
	}
	b, _ := json.Marshal(s)
	if err := a.state.Save(ctx, key, b); err != nil {
		return settlement{}, fmt.Errorf("karbon: save settlement of invoice %s: %w", inv.InvoiceKey, err)
	}
	return s, nil
}

// cardFundings are the fundings of a card paid through Karbon Payments.
var cardFundings = map[string]bool{"credit": true, "debit": true, "prepaid": true}

// paymentRail names how a payment was made. Through Karbon Payments it is
// a card (a card type, or a card's funding) or a bank debit: ach when its
// funding or method says so, else bank_transfer. A manual payment is its
// PaymentMethod's words through the settlement rails (Karbon's methods:
// Bank Transfer, Direct Debit, Credit Card Online or Office, Check, Cash,
// Other).
func (a *Adapter) paymentRail(p payment) string {
	if p.PaymentType == "Payment" {
		var cardType, funding string
		if p.KarbonPayment != nil {
			cardType, funding = p.KarbonPayment.CardType, strings.ToLower(strings.TrimSpace(p.KarbonPayment.CardFunding))
		}
		if cardType != "" || cardFundings[funding] {
			return "card"
		}
		if a.rails.Of(funding) == "ach" || a.rails.Of(p.PaymentMethod) == "ach" {
			return "ach"
		}
		return "bank_transfer"
	}
	return a.rails.Of(p.PaymentMethod)
}

// karbonRails are the words of Karbon's manual payment methods the
// settlement rails do not already name.
var karbonRails = map[string]string{"cash": "cash", "other": "other", "us_bank_account": "ach"}

// newRails is Karbon's words and the defaults, with the configuration's
// over them.
func newRails(cfg map[string]string) (xero.Rails, error) {
	m := make(map[string]string, len(karbonRails)+len(cfg))
	for k, v := range karbonRails {
		m[k] = v
	}
	for k, v := range cfg {
		m[k] = v
	}
	return xero.NewRails(m)
}

// decimalOf reads one of Karbon's amounts, a JSON number, exactly.
func decimalOf(v jsontext.Value) (*big.Rat, error) {
	s := strings.TrimSpace(string(v))
	if s == "" || s == "null" {
		return nil, fmt.Errorf("an amount is missing")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("amount %s is not a number", s)
	}
	return r, nil
}

// amount2 writes an amount with two places, halves away from zero.
func amount2(r *big.Rat) string {
	if s := r.FloatString(2); s != "-0.00" {
		return s
	}
	return "0.00"
}
