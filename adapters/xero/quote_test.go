package xero_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

func quoteID(i int) string { return fmt.Sprintf("b1e2d3c4-0000-4000-8000-%012d", i) }

// addQuotes stores n quotes, a sixth in each of Xero's statuses.
func addQuotes(x *vendortest.Xero, n int) {
	statuses := []string{"DRAFT", "SENT", "DECLINED", "ACCEPTED", "INVOICED", "DELETED"}
	for i := range n {
		x.AddQuote(vendortest.XeroQuote{QuoteID: quoteID(i), QuoteNumber: fmt.Sprintf("QU-%04d", i),
			Title: "Year-end accounts", Status: statuses[i%len(statuses)], ContactID: fmt.Sprintf("a3675fc4-f8dd-4f03-ba5b-%012d", i%7),
			ContactName: "Barney Rubble", Date: epoch.AddDate(0, 0, -20), Expiry: epoch.AddDate(0, 0, 10),
			Lines: []string{"Statutory accounts", "Corporation tax return"}, Total: "2450.005", CurrencyCode: "GBP",
			Updated: epoch.Add(time.Duration(i) * time.Minute)})
	}
}

func decodeEngagements(t *testing.T, raws []json.RawMessage) map[string]practice.Engagement {
	t.Helper()
	out := map[string]practice.Engagement{}
	for _, raw := range raws {
		var e practice.Engagement
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		out[e.ID] = e
	}
	return out
}

// Quotes are engagements, read 100 a page as Xero publishes, across
// Xero's pages; a poll sends If-Modified-Since.
func TestQuotesAreEngagements(t *testing.T) {
	x := vendortest.StartXero(t)
	addQuotes(x, 230)
	a := newAdapter(t, x)
	engs := decodeEngagements(t, vendortest.ListAll(t, a, live, practice.Engagements, practice.Filter{}, 40))
	if len(engs) != 230 {
		t.Fatalf("%d engagements, want 230", len(engs))
	}
	for _, r := range x.Requests() {
		if strings.Contains(r, "/Quotes") && (strings.Contains(r, "pageSize") || !strings.Contains(r, "order=QuoteID")) {
			t.Errorf("%s: Xero takes no page size for quotes, and pages in QuoteID order", r)
		}
	}
	want := []string{"proposed", "sent", "declined", "signed", "ended", "ended"}
	for i := range 6 {
		if got := engs["eng_"+quoteID(i)]; got.Status != want[i] {
			t.Errorf("quote %d: %q, want %q", i, got.Status, want[i])
		}
	}
	e := engs["eng_"+quoteID(3)]
	if e.Client != nil || e.Scope != "Year-end accounts: Statutory accounts, Corporation tax return" ||
		e.Fee != (practice.Money{Amount: "2450.01", Currency: "GBP"}) || e.ReleasedJobs == nil || len(e.ReleasedJobs) != 0 ||
		e.SignedAt == nil || !e.SignedAt.Equal(epoch.Add(3*time.Minute)) || !e.CreatedAt.Equal(epoch.AddDate(0, 0, -20)) ||
		e.Version != practice.VersionAt(epoch.Add(3*time.Minute)) {
		t.Errorf("accepted quote: %+v", e)
	}
	if engs["eng_"+quoteID(1)].SignedAt != nil {
		t.Errorf("a sent quote has no signed_at: %+v", engs["eng_"+quoteID(1)])
	}

	before := len(x.Requests())
	since := epoch.Add(200 * time.Minute)
	p, err := a.List(context.Background(), live, practice.Engagements, practice.Query{Filter: practice.Filter{UpdatedSince: since}, Limit: 100})
	if err != nil || len(p.Items) != 30 || p.HasMore {
		t.Fatalf("poll: %d items, has_more %v, %v", len(p.Items), p.HasMore, err)
	}
	if calls := x.Requests()[before:]; len(calls) != 1 || !strings.HasSuffix(calls[0], since.Format(time.RFC3339)) {
		t.Errorf("poll calls %v", calls)
	}

	raw, err := a.Get(context.Background(), live, practice.Engagements, "eng_"+quoteID(3))
	if err != nil {
		t.Fatal(err)
	}
	if alone := decodeEngagements(t, []json.RawMessage{raw})["eng_"+quoteID(3)]; alone.Version != e.Version || alone.Scope != e.Scope {
		t.Errorf("read alone %+v", alone)
	}
	if _, err := a.Get(context.Background(), live, practice.Engagements, "eng_"+quoteID(999)); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("a quote Xero does not have: %v", err)
	}
}

// signed_at is the time of the first state read accepted, through later
// edits, an acceptance taken back and a restart.
func TestQuoteSignedAtStays(t *testing.T) {
	x := vendortest.StartXero(t)
	addQuotes(x, 2)
	state := changes.NewMemoryState()
	get := func() practice.Engagement {
		t.Helper()
		a := newAdapterDeps(t, x, upstream.Deps{State: state})
		raw, err := a.Get(context.Background(), live, practice.Engagements, "eng_"+quoteID(1))
		if err != nil {
			t.Fatal(err)
		}
		return decodeEngagements(t, []json.RawMessage{raw})["eng_"+quoteID(1)]
	}
	accepted := epoch.Add(time.Hour)
	x.EditQuote(quoteID(1), accepted, func(q *vendortest.XeroQuote) { q.Status = "ACCEPTED" })
	if got := get(); got.Status != "signed" || got.SignedAt == nil || !got.SignedAt.Equal(accepted) {
		t.Fatalf("accepted: %+v", got)
	}
	x.EditQuote(quoteID(1), accepted.Add(time.Hour), func(q *vendortest.XeroQuote) { q.Status = "SENT" })
	x.EditQuote(quoteID(1), accepted.Add(2*time.Hour), func(q *vendortest.XeroQuote) { q.Status = "ACCEPTED" })
	if got := get(); got.SignedAt == nil || !got.SignedAt.Equal(accepted) {
		t.Fatalf("accepted again: %+v", got)
	}
}

// A quote the contract cannot carry is Xero's unusable answer: the
// quote's alone, named on its page.
func TestUnusableQuotes(t *testing.T) {
	for name, edit := range map[string]func(*vendortest.XeroQuote){
		"a status Xero does not publish": func(q *vendortest.XeroQuote) { q.Status = "MAYBE" },
		"no currency":                    func(q *vendortest.XeroQuote) { q.CurrencyCode = "" },
		"a total that is no decimal":     func(q *vendortest.XeroQuote) { q.Total = "1e3" },
	} {
		t.Run(name, func(t *testing.T) {
			x := vendortest.StartXero(t)
			addQuotes(x, 1)
			x.EditQuote(quoteID(0), epoch, edit)
			page, err := newAdapter(t, x).List(context.Background(), live, practice.Engagements, practice.Query{Limit: 10})
			var bad *upstream.MalformedError
			if err != nil || len(page.Items) != 0 || len(page.Unusable) != 1 || page.Unusable[0].ID != "eng_"+quoteID(0) ||
				!errors.As(page.Unusable[0].Err, &bad) {
				t.Fatalf("%d items, unusable %v, %v", len(page.Items), page.Unusable, err)
			}
		})
	}
}
