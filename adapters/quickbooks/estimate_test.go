package quickbooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/quickbooks"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

func decodeEngagement(t *testing.T, raw []byte) practice.Engagement {
	t.Helper()
	var e practice.Engagement
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// estimateAdapter is an adapter on state, whose engagements are the
// firm's when keeps says so.
func estimateAdapter(t *testing.T, q *vendortest.QuickBooks, clock *vendortest.Clock, state changes.StateStore, keeps func() bool) *quickbooks.Adapter {
	t.Helper()
	cfg := quickbooks.Config{Firm: live.Firm, RealmID: q.RealmID, BaseURL: q.URL, VerifierToken: q.VerifierToken,
		OAuth2: upstream.OAuth2Config{AccessToken: q.Token}}
	var opts []quickbooks.Option
	if keeps != nil {
		opts = append(opts, quickbooks.WithEngagements(keeps))
	}
	deps := upstream.Deps{State: state}
	if clock != nil {
		deps.Clock = clock
	}
	a, err := quickbooks.New(cfg, deps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Every status Intuit publishes for an estimate is an engagement's: Pending
// sent (proposed while QuickBooks says it needs sending), Accepted signed,
// Rejected declined, Closed ended; scope its lines' names, fee its total in
// its currency, released_jobs []. A list of 2,500 is three queries.
func TestEstimatesAreEngagements(t *testing.T) {
	q := vendortest.StartQuickBooks(t)
	clock := vendortest.NewClock(epoch.Add(time.Hour))
	q.SetNow(clock.Now)
	add := func(id, status, email string) {
		q.AddEstimate(vendortest.QBEstimate{ID: id, DocNumber: "E" + id, CustomerID: "7", CustomerName: "Birch & Co",
			TxnDate: epoch, Lines: []string{"Year-end accounts", "Corporation tax return"}, Total: "2400.5",
			Currency: "GBP", Status: status, EmailStatus: email, Updated: epoch})
	}
	want := map[string]string{"1": "sent", "2": "proposed", "3": "signed", "4": "declined", "5": "ended"}
	add("1", "Pending", "EmailSent")
	add("2", "Pending", "NeedToSend")
	add("3", "Accepted", "EmailSent")
	add("4", "Rejected", "")
	add("5", "Closed", "")
	for i := 6; i <= 2500; i++ {
		add(fmt.Sprint(i), "Pending", "")
	}
	a := estimateAdapter(t, q, clock, nil, nil)
	var all []practice.Engagement
	cursor := ""
	for {
		page, err := a.List(context.Background(), live, practice.Engagements, practice.Query{Limit: 200, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Items {
			all = append(all, decodeEngagement(t, raw))
		}
		if !page.HasMore {
			break
		}
		cursor = page.Next
	}
	if len(all) != 2500 {
		t.Fatalf("%d engagements, want 2,500", len(all))
	}
	if n := len(q.Requests()); n != 3 {
		t.Errorf("%d queries for 2,500 estimates, want 3: %q", n, q.Requests())
	}
	for _, e := range all[:5] {
		id := strings.TrimPrefix(e.ID, "eng_qb-")
		if e.Status != want[id] {
			t.Errorf("%s: %s, want %s", e.ID, e.Status, want[id])
		}
		if e.Scope != "Year-end accounts, Corporation tax return" || e.Fee != (practice.Money{Amount: "2400.50", Currency: "GBP"}) ||
			e.Client != nil || e.ReleasedJobs == nil || len(e.ReleasedJobs) != 0 {
			t.Errorf("%s: %+v", e.ID, e)
		}
		if (e.SignedAt != nil) != (id == "3") {
			t.Errorf("%s signed at %v", e.ID, e.SignedAt)
		}
	}
	raw, err := a.Get(context.Background(), live, practice.Engagements, "eng_qb-3")
	if err != nil || decodeEngagement(t, raw).Status != "signed" {
		t.Fatalf("get: %s %v", raw, err)
	}
}

// One change data capture call a poll reads estimates beside invoices and
// payments: an acceptance is signed at the first read of it, which later
// reads keep (the invoice made of it closes the estimate: ended, still
// signed then); a deletion ends the engagement as last seen. A firm whose
// engagements come from elsewhere asks for no estimates.
func TestEstimateChangesFollowChangeDataCapture(t *testing.T) {
	q := vendortest.StartQuickBooks(t)
	clock := vendortest.NewClock(epoch.Add(time.Hour))
	q.SetNow(clock.Now)
	for _, id := range []string{"1", "2"} {
		q.AddEstimate(vendortest.QBEstimate{ID: id, DocNumber: "E" + id, CustomerID: "7", CustomerName: "Birch",
			TxnDate: epoch, Lines: []string{"Payroll"}, Total: "300.00", Updated: epoch})
	}
	state := changes.NewMemoryState()
	keeps := true
	a := estimateAdapter(t, q, clock, state, func() bool { return keeps })
	ctx := context.Background()
	poll := func(cursor string) (practice.ChangesPage, map[string]practice.Engagement) {
		t.Helper()
		clock.Advance(2 * time.Minute)
		page, err := a.Changes(ctx, live, cursor)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]practice.Engagement{}
		for _, o := range page.Others {
			if o.Kind != practice.Engagements {
				t.Fatalf("changes of %s", o.Kind)
			}
			for _, raw := range o.Changed {
				e := decodeEngagement(t, raw)
				got[e.ID] = e
				// What the sync would keep: the last state seen.
				_ = state.Save(ctx, changes.StateKey(live, practice.Engagements, e.ID), raw)
			}
		}
		return page, got
	}
	start, err := a.Changes(ctx, live, "")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	q.SetEstimateStatus("1", "Accepted", clock.Now())
	q.SetEstimateStatus("2", "Rejected", clock.Now())
	before := len(q.Requests())
	page, got := poll(start.Next)
	reqs := q.Requests()[before:]
	if len(reqs) != 1 || !strings.Contains(reqs[0], "entities=Invoice%2CEstimate%2CPayment") {
		t.Fatalf("the poll made %q, want one cdc call with estimates", reqs)
	}
	signed := got["eng_qb-1"]
	if signed.Status != "signed" || signed.SignedAt == nil || got["eng_qb-2"].Status != "declined" {
		t.Fatalf("after the acceptance: %+v", got)
	}
	at := *signed.SignedAt
	clock.Advance(time.Minute)
	q.InvoiceEstimate("1", clock.Now())
	page, got = poll(page.Next)
	if e := got["eng_qb-1"]; e.Status != "ended" || e.SignedAt == nil || !e.SignedAt.Equal(at) {
		t.Fatalf("invoiced: %+v, want ended and signed at %v", e, at)
	}
	if len(page.Changed) != 1 {
		t.Errorf("the invoice made of the estimate: %d invoices changed", len(page.Changed))
	}
	clock.Advance(time.Minute)
	q.DeleteEstimate("2", clock.Now())
	page, got = poll(page.Next)
	if e := got["eng_qb-2"]; e.Status != "ended" || e.Scope != "Payroll" || e.Client != nil {
		t.Fatalf("deleted: %+v, want ended as last seen", e)
	}
	// Read again when QuickBooks no longer has it (a reconciliation's
	// check): still the ended engagement, not gone.
	raw, err := a.Get(ctx, live, practice.Engagements, "eng_qb-2")
	if err != nil || decodeEngagement(t, raw).Status != "ended" {
		t.Fatalf("a deleted estimate read: %s %v", raw, err)
	}
	keeps = false
	before = len(q.Requests())
	poll(page.Next)
	if reqs := q.Requests()[before:]; len(reqs) != 1 || strings.Contains(reqs[0], "Estimate") {
		t.Errorf("engagements from elsewhere: %q, want one cdc call without estimates", reqs)
	}
}

// A webhook naming an estimate reads it and records its engagement; its
// acceptance is engagement.signed's change; an estimate never seen and
// only updated is left to change data capture; a firm whose engagements
// come from elsewhere reads none.
func TestEstimateWebhooks(t *testing.T) {
	q := vendortest.StartQuickBooks(t)
	q.AddEstimate(vendortest.QBEstimate{ID: "8", DocNumber: "E8", CustomerID: "7", CustomerName: "Birch",
		TxnDate: epoch, Lines: []string{"Advisory"}, Total: "500.00", Updated: epoch})
	q.AddEstimate(vendortest.QBEstimate{ID: "9", DocNumber: "E9", CustomerID: "7", CustomerName: "Birch",
		TxnDate: epoch, Lines: []string{"Audit"}, Total: "900.00", Updated: epoch})
	keeps := true
	a := estimateAdapter(t, q, nil, changes.NewMemoryState(), func() bool { return keeps })
	s := &sink{}
	srv := httptest.NewServer(a.Webhook(s))
	t.Cleanup(srv.Close)
	notify := func(body []byte) {
		t.Helper()
		if status, err := q.Notify(srv.URL, body); err != nil || status != 200 {
			t.Fatalf("delivery: %d %v", status, err)
		}
	}
	notify(vendortest.QuickBooksCloudEvents(q.RealmID,
		vendortest.QBEvent{Entity: "Estimate", ID: "8", Operation: "Create", At: epoch},
		vendortest.QBEvent{Entity: "Estimate", ID: "9", Operation: "Update", At: epoch}))
	got := s.all()
	if len(got) != 1 || got[0].ResourceID != "eng_qb-8" || got[0].Kind != practice.Engagements {
		t.Fatalf("changes %+v, want estimate 8's creation alone", got)
	}
	q.SetEstimateStatus("8", "Accepted", epoch.Add(time.Hour))
	notify(vendortest.QuickBooksLegacy(q.RealmID, vendortest.QBEvent{Entity: "Estimate", ID: "8", Operation: "Update", At: epoch.Add(time.Hour)}))
	got = s.all()
	if len(got) != 2 {
		t.Fatalf("%d changes after the acceptance", len(got))
	}
	if e := decodeEngagement(t, got[1].After); e.Status != "signed" || e.SignedAt == nil {
		t.Errorf("accepted: %+v", e)
	}
	keeps = false
	before := len(q.Requests())
	notify(vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Estimate", ID: "8", Operation: "Update", At: epoch.Add(2 * time.Hour)}))
	if len(q.Requests()) != before || len(s.all()) != 2 {
		t.Errorf("engagements from elsewhere: the estimate was read")
	}
}
