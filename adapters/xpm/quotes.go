package xpm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// listQuotes walks the current quotes, the drafts, then each year of
// quote.api/list less those already read, every list detailed: the
// tasks make the engagement's scope.
func (a *Adapter) listQuotes(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	return walkDated(ctx, a, datedLists[quote]{
		current: "/v3.1/quote.api/current", draft: "/v3.1/quote.api/draft", list: "/v3.1/quote.api/list",
		fetch: a.fetchQuotes,
		id:    func(q quote) string { return q.ID },
		convert: records(practice.Engagements, func(q *quote) string { return idOf("eng_", q.ID) }, a.quoteRecord,
			func(rec *practice.Engagement) bool { return after(rec.UpdatedAt, f.UpdatedSince) }),
	}, cur, limit)
}

// fetchQuotes reads one of XPM's quote lists, in number order.
func (a *Adapter) fetchQuotes(ctx context.Context, path string, q url.Values) ([]quote, error) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("detailed", "true")
	return fetchNumbered(ctx, a, path, q, "quotes", &quoteList{}, func(qt quote) string { return qt.ID })
}

func (a *Adapter) getQuote(ctx context.Context, number string) (json.RawMessage, error) {
	var one quoteOne
	if err := a.read(ctx, "/v3.1/quote.api/get/"+url.PathEscape(number), nil, "quote", &one); err != nil {
		return nil, err
	}
	if one.Quote == nil {
		return nil, notFound(practice.Engagements, "eng_"+number)
	}
	if one.Quote.ID != number {
		return nil, upstream.Malformed(a.c.Label(), "quote "+number, fmt.Errorf("the answer is quote %q", one.Quote.ID))
	}
	rec, err := a.quoteRecord(ctx, one.Quote)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&rec)
}

// quoteRecord translates a quote and stamps it. XPM publishes no link
// from a quote to the jobs made for it, nor when it was accepted: its
// released_jobs are [] and its signed_at is when a gateway first read it
// accepted.
func (a *Adapter) quoteRecord(ctx context.Context, q *quote) (practice.Engagement, error) {
	bad := func(err error) (practice.Engagement, error) {
		return practice.Engagement{}, upstream.Malformed(a.c.Label(), "quote "+q.ID, err)
	}
	if !numberRE.MatchString(q.ID) {
		return bad(fmt.Errorf("quote number %q", q.ID))
	}
	status, err := proposals.Status(q.State)
	if err != nil {
		return bad(err)
	}
	fee, err := amount(q.AmountIncludingTax)
	if err != nil {
		return bad(err)
	}
	dated, err := xpmTime(q.Date, a.loc)
	if err != nil {
		return bad(err)
	}
	tasks := make([]string, 0, len(q.Tasks))
	for _, t := range q.Tasks {
		tasks = append(tasks, t.Name)
	}
	rec := practice.Engagement{ID: "eng_" + q.ID, Object: "engagement", Status: status,
		Scope: proposals.Scope(q.Name, tasks), Fee: practice.Money{Amount: money2(fee), Currency: a.cfg.Currency},
		Billing: "fixed", ReleasedJobs: []string{}}
	if strings.EqualFold(strings.TrimSpace(q.Type), "estimate") {
		// An estimate is billed on the time spent, not the price quoted.
		rec.Billing = "estimate"
	}
	if q.Client != nil && q.Client.UUID != "" {
		id := "cli_" + q.Client.UUID
		rec.Client = &id
	}
	st, err := a.stamps.of(ctx, practice.Engagements, rec.ID, &rec)
	if err != nil {
		return practice.Engagement{}, err
	}
	if rec.SignedAt, err = a.signings.At(ctx, rec.ID, status == "signed", st.At); err != nil {
		return practice.Engagement{}, fmt.Errorf("xpm: %w", err)
	}
	rec.CreatedAt, rec.UpdatedAt, rec.Version = st.First, st.At, practice.VersionAt(st.At)
	if !dated.IsZero() && dated.Before(rec.CreatedAt) {
		rec.CreatedAt = dated
	}
	return rec, nil
}
