package xero

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// quotePage is how many quotes Xero answers a page of /Quotes: it takes no
// page size, and a shorter page is the last.
const quotePage = 100

// listQuotes walks /Quotes a page at a time in QuoteID order (which edits
// do not reorder); updated_since goes to Xero as If-Modified-Since.
func (a *Adapter) listQuotes(ctx context.Context, t practice.Tenant, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	since := f.UpdatedSince
	w := paging.Walk[quote]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[quote], error) {
			return a.fetchQuotes(ctx, since, token)
		},
		ID: func(q quote) string { return q.QuoteID },
		Match: func(q quote) bool {
			if since.IsZero() {
				return true
			}
			u, err := xeroTime(q.UpdatedDateUTC)
			return err == nil && !u.Before(since)
		},
		Convert: func(ctx context.Context, qs []paging.Found[quote]) ([]json.RawMessage, error) {
			return paging.Each(ctx, 1, len(qs), func(ctx context.Context, i int) (json.RawMessage, error) {
				q := &qs[i].Item
				raw, err := a.quoteJSON(ctx, t, q)
				if err != nil && isUUID(q.QuoteID) {
					// A row that cannot be read is its quote's alone.
					return nil, practice.Unusable(practice.Engagements, "eng_"+q.QuoteID, "the quote", err)
				}
				return raw, err
			})
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// fetchQuotes reads the page of /Quotes the token names, "" the first.
func (a *Adapter) fetchQuotes(ctx context.Context, since time.Time, token string) (paging.VendorPage[quote], error) {
	var page paging.VendorPage[quote]
	n := 1
	if token != "" {
		var err error
		if n, err = strconv.Atoi(token); err != nil || n < 2 {
			return page, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
				Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
		}
	}
	h := http.Header{}
	if !since.IsZero() {
		h.Set("If-Modified-Since", since.UTC().Format(time.RFC3339))
	}
	body, err := a.getQuotes(ctx, upstream.Request{Path: "/Quotes",
		Query: url.Values{"page": {strconv.Itoa(n)}, "order": {"QuoteID ASC"}}, Header: h}, "quotes")
	if err != nil {
		return page, fmt.Errorf("xero: list quotes: %w", err)
	}
	page.Items = body.Quotes
	if len(body.Quotes) >= quotePage {
		page.Next = strconv.Itoa(n + 1)
	}
	return page, nil
}

func (a *Adapter) getQuote(ctx context.Context, t practice.Tenant, quoteID string) (json.RawMessage, error) {
	body, err := a.getQuotes(ctx, upstream.Request{Path: "/Quotes/" + quoteID}, "quote")
	if err != nil {
		return nil, fmt.Errorf("xero: read quote %s: %w", quoteID, err)
	}
	if len(body.Quotes) != 1 || body.Quotes[0].QuoteID != quoteID {
		return nil, upstream.Malformed(a.c.Label(), "quote "+quoteID, fmt.Errorf("the answer holds %d quotes, not the one asked for", len(body.Quotes)))
	}
	return a.quoteJSON(ctx, t, &body.Quotes[0])
}

// getQuotes makes a call that answers with quotes.
func (a *Adapter) getQuotes(ctx context.Context, r upstream.Request, what string) (quotes, error) {
	resp, err := a.c.Do(ctx, r)
	if err != nil {
		return quotes{}, err
	}
	var body quotes
	if err := upstream.DecodeJSON(resp.Body, &body); err != nil {
		return quotes{}, upstream.Malformed(a.c.Label(), what, err)
	}
	return body, nil
}

// quoteJSON translates a Xero quote into the engagement it proposes:
// DRAFT proposed, SENT sent, ACCEPTED signed, DECLINED declined, INVOICED
// and DELETED ended; scope its title and its lines' descriptions; fee its
// total in its currency; signed_at the UpdatedDateUTC of the first state
// read accepted. Xero publishes no time of acceptance and no link from a
// quote to work (released_jobs is []), nor a quote's creation time: its
// created_at is its date.
func (a *Adapter) quoteJSON(ctx context.Context, t practice.Tenant, q *quote) (json.RawMessage, error) {
	bad := func(err error) (json.RawMessage, error) {
		return nil, upstream.Malformed(a.c.Label(), "quote "+q.QuoteID, err)
	}
	if !isUUID(q.QuoteID) {
		return bad(fmt.Errorf("QuoteID %q is not a UUID", q.QuoteID))
	}
	status, err := proposals.Status(q.Status)
	if err != nil {
		return bad(err)
	}
	fee, err := decimal2(q.Total)
	if err != nil {
		return bad(err)
	}
	if q.CurrencyCode == "" {
		return bad(fmt.Errorf("no CurrencyCode"))
	}
	updated, err := xeroTime(q.UpdatedDateUTC)
	if err != nil {
		return bad(err)
	}
	if updated.IsZero() {
		return bad(fmt.Errorf("no UpdatedDateUTC"))
	}
	created, err := xeroTime(q.Date)
	if err != nil {
		return bad(err)
	}
	// Xero publishes no creation time on a quote: created_at is its date
	// (no later than its last update), null when it has none.
	if created.After(updated) {
		created = updated
	}
	lines := make([]string, 0, len(q.LineItems))
	for _, l := range q.LineItems {
		lines = append(lines, l.Description)
	}
	title := q.Title
	if title == "" {
		title = q.QuoteNumber
	}
	rec := practice.Engagement{ID: "eng_" + q.QuoteID, Object: "engagement", Status: status,
		Scope: proposals.Scope(title, lines), Fee: practice.Money{Amount: fee, Currency: q.CurrencyCode},
		Billing: "fixed", ReleasedJobs: []string{}, CreatedAt: practice.KnownAt(created), UpdatedAt: updated, Version: practice.VersionAt(updated)}
	if rec.Client, err = a.client(ctx, t, q.Contact); err != nil {
		return nil, err
	}
	if rec.SignedAt, err = a.signings.At(ctx, rec.ID, status == "signed", updated); err != nil {
		return nil, fmt.Errorf("xero: %w", err)
	}
	// The client is the records system's, linked apart from the quote: a
	// link found later moves the version (practice/stamps).
	seen, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Engagements, ID: rec.ID, Content: &rec, Vendor: updated})
	if err != nil {
		return nil, err
	}
	rec.UpdatedAt, rec.Version = seen.At, seen.Version()
	return practice.Marshal(&rec)
}
