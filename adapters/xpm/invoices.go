package xpm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// listInvoices walks the current invoices, the drafts, then each year of
// invoice.api/list less those already read.
func (a *Adapter) listInvoices(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	return walkDated(ctx, a, datedLists[invoice]{
		current: "/v3.1/invoice.api/current", draft: "/v3.1/invoice.api/draft", list: "/v3.1/invoice.api/list",
		fetch: a.fetchInvoices,
		id:    func(inv invoice) string { return inv.ID },
		convert: records(practice.Invoices, func(inv *invoice) string { return idOf("inv_", inv.ID) }, a.invoiceRecord,
			func(rec *practice.Invoice) bool { return after(rec.UpdatedAt, f.UpdatedSince) }),
	}, cur, limit)
}

// datedLists are the lists XPM keeps of a kind it dates (invoices,
// quotes): the current ones, the drafts, and every one a year at a time
// by its date.
type datedLists[T any] struct {
	current, draft, list string
	fetch                func(ctx context.Context, path string, q url.Values) ([]T, error)
	id                   func(T) string
	convert              func(context.Context, []paging.Found[T]) ([]json.RawMessage, error)
}

// walkDated walks the current list, the drafts, then each year of the
// dated list less those already read.
func walkDated[T any](ctx context.Context, a *Adapter, l datedLists[T], cur paging.Cursor, limit int) (practice.Page, error) {
	first := a.firstWindow()
	// The current and draft items' numbers, as read in this call: the
	// yearly lists hold them too.
	seen := map[string]bool{}
	read := map[string]bool{}
	fetch := func(ctx context.Context, path string) ([]T, error) {
		items, err := l.fetch(ctx, path, nil)
		if err == nil {
			read[path] = true
			for _, it := range items {
				seen[l.id(it)] = true
			}
		}
		return items, err
	}
	w := paging.Walk[T]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[T], error) {
			var page paging.VendorPage[T]
			var err error
			switch token {
			case "":
				page.Items, err = fetch(ctx, l.current)
				page.Next = tokenDraft
				return page, err
			case tokenDraft:
				page.Items, err = fetch(ctx, l.draft)
				page.Next = first
				return page, err
			}
			from, to, err := parseWindow(token)
			if err != nil {
				return page, err
			}
			for _, p := range []string{l.current, l.draft} {
				if !read[p] {
					if _, err := fetch(ctx, p); err != nil {
						return page, err
					}
				}
			}
			items, err := l.fetch(ctx, l.list, url.Values{"from": {from.Format("20060102")}, "to": {to.Format("20060102")}})
			if err != nil {
				return page, err
			}
			for _, it := range items {
				if !seen[l.id(it)] {
					page.Items = append(page.Items, it)
				}
			}
			page.Next, err = a.nextWindow(token, first)
			return page, err
		},
		ID:       l.id,
		Convert:  l.convert,
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// fetchInvoices reads one of XPM's invoice lists, in number order.
func (a *Adapter) fetchInvoices(ctx context.Context, path string, q url.Values) ([]invoice, error) {
	return fetchNumbered(ctx, a, path, q, "invoices", &invoiceList{}, func(inv invoice) string { return inv.ID })
}

// numberedList is an answer of XPM's whose entries may be null (invoices,
// quotes).
type numberedList[T any] interface {
	xpmAnswer
	entries() []*T
}

func (l *invoiceList) entries() []*invoice { return l.Invoices }
func (l *quoteList) entries() []*quote     { return l.Quotes }

// fetchNumbered reads one of XPM's lists into l and returns its entries
// that are not null, in number order.
func fetchNumbered[T any](ctx context.Context, a *Adapter, path string, q url.Values, what string, l numberedList[T], number func(T) string) ([]T, error) {
	if err := a.read(ctx, path, q, what, l); err != nil {
		return nil, err
	}
	out := make([]T, 0, len(l.entries()))
	for _, it := range l.entries() {
		if it != nil {
			out = append(out, *it)
		}
	}
	slices.SortFunc(out, func(x, y T) int { return strings.Compare(number(x), number(y)) })
	return out, nil
}

func (a *Adapter) getInvoice(ctx context.Context, number string) (json.RawMessage, error) {
	var one invoiceOne
	if err := a.read(ctx, "/v3.1/invoice.api/get/"+url.PathEscape(number), nil, "invoice", &one); err != nil {
		return nil, err
	}
	if one.Invoice == nil {
		return nil, notFound(practice.Invoices, "inv_"+number)
	}
	rec, err := a.invoiceRecord(ctx, one.Invoice)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&rec)
}

// settlement is what an invoice's payments say, kept in the state store
// for as long as the amount paid stays the same, so that a paid invoice's
// payments are read once.
type settlement struct {
	At     time.Time `json:"a"`
	Via    string    `json:"v"`
	Amount string    `json:"m"`
}

// invoiceRecord translates an invoice and stamps it.
func (a *Adapter) invoiceRecord(ctx context.Context, inv *invoice) (practice.Invoice, error) {
	bad := func(err error) (practice.Invoice, error) {
		return practice.Invoice{}, upstream.Malformed(a.c.Label(), "invoice "+inv.ID, err)
	}
	if !numberRE.MatchString(inv.ID) {
		return bad(fmt.Errorf("invoice number %q", inv.ID))
	}
	total, err := amount(inv.AmountIncludingTax)
	if err != nil {
		return bad(err)
	}
	paid, err := amount(inv.AmountPaid)
	if err != nil {
		return bad(err)
	}
	due, err := amount(inv.AmountOutstanding)
	if err != nil {
		return bad(err)
	}
	issued, err := xpmDate(inv.Date)
	if err != nil {
		return bad(err)
	}
	dueOn, err := xpmDate(inv.DueDate)
	if err != nil {
		return bad(err)
	}
	rec := practice.Invoice{ID: "inv_" + inv.ID, Object: "invoice", Number: inv.ID,
		Total:     practice.Money{Amount: money2(total), Currency: a.cfg.Currency},
		AmountDue: practice.Money{Amount: money2(due), Currency: a.cfg.Currency}, DueOn: dueOn}
	if inv.Client != nil && inv.Client.UUID != "" {
		id := "cli_" + inv.Client.UUID
		rec.Client = &id
	}
	switch strings.ToLower(strings.TrimSpace(inv.Status)) {
	case "draft":
		rec.Status = "draft"
	case "cancelled", "canceled", "void", "voided", "deleted":
		rec.Status = "void"
	case "paid", "approved", "":
		switch {
		case due.Sign() <= 0 && (paid.Sign() > 0 || strings.EqualFold(inv.Status, "paid")):
			rec.Status = "paid"
		case paid.Sign() > 0:
			rec.Status = "partially_paid"
		default:
			rec.Status = "issued"
		}
	default:
		return bad(fmt.Errorf("status %q is not one XPM publishes", inv.Status))
	}
	if rec.Status != "draft" {
		rec.IssuedOn = issued
	}
	if rec.Status == "paid" {
		s, err := a.settlement(ctx, inv.ID, money2(paid))
		if err != nil {
			return practice.Invoice{}, err
		}
		rec.SettledVia = s.Via
		if !s.At.IsZero() {
			rec.PaidAt = &s.At
		}
	}
	st, err := a.stamps.of(ctx, practice.Invoices, rec.ID, &rec)
	if err != nil {
		return practice.Invoice{}, err
	}
	if rec.Status == "paid" && rec.PaidAt == nil {
		rec.PaidAt = &st.At
	}
	rec.CreatedAt, rec.UpdatedAt, rec.Version = st.First, st.At, practice.VersionAt(st.At)
	if d, err := xpmTime(inv.Date, a.loc); err == nil && !d.IsZero() && d.Before(rec.CreatedAt) {
		rec.CreatedAt = d
	}
	return rec, nil
}

// settlement reads a paid invoice's payments, once for each amount paid:
// the latest payment is when it was paid, and its reference names the
// rail. An invoice paid with no payment recorded (credited) settles as a
// credit note.
func (a *Adapter) settlement(ctx context.Context, number, paid string) (settlement, error) {
	key := "xpm/settlement/" + a.tenant().String() + "/" + number
	if raw, err := a.state.Last(ctx, key); err != nil {
		return settlement{}, fmt.Errorf("xpm: settlement of %s: %w", number, err)
	} else if raw != nil {
		var s settlement
		if json.Unmarshal(raw, &s) == nil && s.Amount == paid {
			return s, nil
		}
	}
	var l paymentList
	if err := a.read(ctx, "/v3.1/invoice.api/payments/"+url.PathEscape(number), nil, "invoice payments", &l); err != nil {
		return settlement{}, err
	}
	s := settlement{Amount: paid, Via: "credit_note"}
	var last *payment
	for _, p := range l.Payments {
		if p == nil {
			continue
		}
		at, err := xpmTime(p.Date, a.loc)
		if err != nil {
			return settlement{}, upstream.Malformed(a.c.Label(), "payments of invoice "+number, err)
		}
		if last == nil || !at.Before(s.At) {
			last, s.At = p, at
		}
	}
	if last != nil {
		s.Via = a.rails.Of(last.Reference)
	}
	b, _ := json.Marshal(s)
	if err := a.state.Save(ctx, key, b); err != nil {
		return settlement{}, fmt.Errorf("xpm: save settlement of %s: %w", number, err)
	}
	return s, nil
}
