package quickbooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/quickbooks"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

var (
	live  = practice.Tenant{Firm: "frm_birch"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

type sink struct {
	mu      sync.Mutex
	changes []practice.Change
}

func (s *sink) Publish(_ context.Context, c practice.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, c)
	return nil
}

func (s *sink) all() []practice.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]practice.Change(nil), s.changes...)
}

// fixture is a company with n open invoices, dated at epoch.
func fixture(t *testing.T, n int) *vendortest.QuickBooks {
	t.Helper()
	q := vendortest.StartQuickBooks(t)
	for i := 1; i <= n; i++ {
		q.AddInvoice(vendortest.QBInvoice{ID: fmt.Sprint(i), DocNumber: fmt.Sprintf("%04d", 1000+i),
			CustomerID: fmt.Sprint(1 + i%7), CustomerName: fmt.Sprintf("Customer %d", 1+i%7),
			TxnDate: epoch.AddDate(0, 0, -30), DueDate: epoch.AddDate(0, 0, -2), Total: "1200.50", Updated: epoch})
	}
	return q
}

func newAdapter(t *testing.T, q *vendortest.QuickBooks, clock *vendortest.Clock, edit ...func(*quickbooks.Config)) *quickbooks.Adapter {
	t.Helper()
	cfg := quickbooks.Config{Firm: live.Firm, RealmID: q.RealmID, BaseURL: q.URL, VerifierToken: q.VerifierToken,
		OAuth2: upstream.OAuth2Config{AccessToken: q.Token}}
	for _, e := range edit {
		e(&cfg)
	}
	deps := upstream.Deps{}
	if clock != nil {
		deps.Clock = clock
	}
	a, err := quickbooks.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func decodeInvoice(t *testing.T, raw []byte) practice.Invoice {
	t.Helper()
	var inv practice.Invoice
	if err := json.Unmarshal(raw, &inv); err != nil {
		t.Fatal(err)
	}
	return inv
}

// The backfill reads 2,500 invoices in three queries of at most 1,000,
// however small the pages asked of the adapter.
func TestListReadsPagesOfAThousand(t *testing.T) {
	q := fixture(t, 2500)
	a := newAdapter(t, q, nil)
	items := vendortest.ListAll(t, a, live, practice.Invoices, practice.Filter{}, 200)
	if len(items) != 2500 {
		t.Fatalf("%d invoices, want 2500", len(items))
	}
	var queries []string
	for _, r := range q.Requests() {
		if strings.Contains(r, "/query?") {
			queries = append(queries, r)
		}
	}
	want := []string{"STARTPOSITION 1 MAXRESULTS 1000", "STARTPOSITION 1001 MAXRESULTS 1000", "STARTPOSITION 2001 MAXRESULTS 1000"}
	if len(queries) != len(want) {
		t.Fatalf("%d queries, want %d: %q", len(queries), len(want), queries)
	}
	for i, w := range want {
		if !strings.Contains(strings.ReplaceAll(queries[i], "+", " "), strings.ReplaceAll(w, " ", "%20")) &&
			!strings.Contains(queries[i], strings.ReplaceAll(w, " ", "%20")) {
			t.Errorf("query %d is %s, want %s", i, queries[i], w)
		}
	}
	first := decodeInvoice(t, items[0])
	if first.ID != "inv_qb-1" || practice.ValueOf(first.Number) != "1001" || first.Status != "issued" || first.Total.Amount != "1200.50" ||
		first.Total.Currency != "USD" || first.DueOn != "2026-02-28" || first.IssuedOn != "2026-01-31" || first.Client != nil {
		t.Errorf("first invoice %+v", first)
	}
}

// Statuses, amounts and how a paid invoice was settled.
func TestInvoiceStatusesAndSettlement(t *testing.T) {
	q := fixture(t, 4)
	q.Pay("1", "Visa", "", epoch.Add(time.Hour))
	q.Pay("2", "Check", "1044", epoch.Add(2*time.Hour))
	q.Pay("3", "Other", "Stripe payout po_123", epoch.Add(3*time.Hour))
	q.Void("4", epoch.Add(4*time.Hour))
	a := newAdapter(t, q, nil, func(c *quickbooks.Config) { c.SettlementRails = map[string]string{"Stripe": "stripe"} })
	want := map[string]struct{ status, via string }{
		"inv_qb-1": {"paid", "card"}, "inv_qb-2": {"paid", "check"}, "inv_qb-3": {"paid", "stripe"}, "inv_qb-4": {"void", ""},
	}
	for id, w := range want {
		raw, err := a.Get(context.Background(), live, practice.Invoices, id)
		if err != nil {
			t.Fatal(err)
		}
		inv := decodeInvoice(t, raw)
		if inv.Status != w.status || inv.SettledVia != w.via {
			t.Errorf("%s: %s via %q, want %s via %q", id, inv.Status, inv.SettledVia, w.status, w.via)
		}
		if w.status == "paid" && (inv.PaidAt == nil || inv.AmountDue.Amount != "0.00") {
			t.Errorf("%s: paid_at %v, amount due %s", id, inv.PaidAt, inv.AmountDue.Amount)
		}
	}
	// The listing reads the payments of a page's paid invoices in one
	// query, and says the same.
	before := len(q.Requests())
	items := vendortest.ListAll(t, a, live, practice.Invoices, practice.Filter{}, 50)
	for _, raw := range items {
		inv := decodeInvoice(t, raw)
		if w := want[inv.ID]; inv.SettledVia != w.via {
			t.Errorf("listed %s settled via %q, want %q", inv.ID, inv.SettledVia, w.via)
		}
	}
	if n := len(q.Requests()) - before; n != 2 {
		t.Errorf("the listing made %d calls, want 2 (the invoices, their payments): %q", n, q.Requests()[before:])
	}
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_qb-99"); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("a missing invoice: %v, want not found", err)
	}
}

// Change data capture: one call a poll for invoices and payments, with
// deletions as Gone; a position older than its 30 days reconciles.
func TestChangesFollowChangeDataCapture(t *testing.T) {
	q := fixture(t, 10)
	clock := vendortest.NewClock(epoch.Add(time.Hour))
	q.SetNow(clock.Now)
	a := newAdapter(t, q, clock)
	start, err := a.Changes(context.Background(), live, "")
	if err != nil || start.Next == "" || len(q.Requests()) != 0 {
		t.Fatalf("the start read %d times: %+v %v", len(q.Requests()), start, err)
	}
	clock.Advance(time.Minute)
	q.Pay("3", "ACH", "", clock.Now())
	q.Delete("5", clock.Now())
	// Past the minute of overlap each call reaches back.
	clock.Advance(2 * time.Minute)
	page, err := a.Changes(context.Background(), live, start.Next)
	if err != nil {
		t.Fatal(err)
	}
	reqs := q.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0], "/cdc?") || !strings.Contains(reqs[0], "entities=Invoice%2CEstimate%2CPayment") {
		t.Fatalf("the poll made %q, want one cdc call for the three entities", reqs)
	}
	if len(page.Changed) != 1 || len(page.Gone) != 1 || page.Gone[0] != "inv_qb-5" || page.More {
		t.Fatalf("changed %d, gone %q", len(page.Changed), page.Gone)
	}
	if inv := decodeInvoice(t, page.Changed[0]); inv.ID != "inv_qb-3" || inv.Status != "paid" || inv.SettledVia != "ach" {
		t.Errorf("changed %+v", inv)
	}
	// Nothing changed since: one call, nothing.
	clock.Advance(time.Minute)
	again, err := a.Changes(context.Background(), live, page.Next)
	if err != nil || len(again.Changed)+len(again.Gone) != 0 {
		t.Fatalf("an idle poll: %+v %v", again, err)
	}
	clock.Advance(31 * 24 * time.Hour)
	n := len(q.Requests())
	if _, err := a.Changes(context.Background(), live, again.Next); !errors.Is(err, practice.ErrFeedExpired) {
		t.Errorf("a position past the look-back: %v, want the feed expired", err)
	}
	if len(q.Requests()) != n {
		t.Error("an expired position was sent to QuickBooks")
	}
}

// Both webhook formats raise the change of the invoice they name; a
// forged signature reads nothing; another company's events are dropped;
// a payment's event raises its invoice paid.
func TestWebhookFormats(t *testing.T) {
	q := fixture(t, 3)
	a := newAdapter(t, q, nil)
	s := &sink{}
	srv := httptest.NewServer(a.Webhook(s))
	t.Cleanup(srv.Close)
	q.AddInvoice(vendortest.QBInvoice{ID: "50", DocNumber: "1050", CustomerID: "1", CustomerName: "Customer 1",
		TxnDate: epoch, DueDate: epoch.AddDate(0, 0, 30), Total: "99.00", Updated: epoch.Add(time.Hour)})

	forged := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Invoice", ID: "50", Operation: "Create", At: epoch})
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(forged)))
	req.Header.Set("intuit-signature", vendortest.SignQuickBooks("not-the-token", forged))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(q.Requests()) != 0 {
		t.Fatalf("a forged delivery: %d, %d reads", resp.StatusCode, len(q.Requests()))
	}

	created := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Invoice", ID: "50", Operation: "Create", At: epoch.Add(time.Hour)})
	if code, err := q.Notify(srv.URL, created); err != nil || code != http.StatusOK {
		t.Fatalf("cloud events: %d %v", code, err)
	}
	got := s.all()
	if len(got) != 1 || got[0].ResourceID != "inv_qb-50" || got[0].Before != nil {
		t.Fatalf("after the CloudEvents delivery: %+v", got)
	}
	// The same body again is acknowledged unread.
	n := len(q.Requests())
	if code, _ := q.Notify(srv.URL, created); code != http.StatusOK || len(q.Requests()) != n {
		t.Errorf("a repeated body: %d, %d reads", code, len(q.Requests())-n)
	}

	pid := q.Pay("50", "MasterCard", "", epoch.Add(2*time.Hour))
	// Intuit names the invoice a payment pays as well: it is read once.
	legacy := vendortest.QuickBooksLegacy(q.RealmID,
		vendortest.QBEvent{Entity: "Invoice", ID: "50", Operation: "Update", At: epoch.Add(2 * time.Hour)},
		vendortest.QBEvent{Entity: "Payment", ID: pid, Operation: "Create", At: epoch.Add(2 * time.Hour)})
	n = len(q.Requests())
	if code, err := q.Notify(srv.URL, legacy); err != nil || code != http.StatusOK {
		t.Fatalf("legacy: %d %v", code, err)
	}
	if reqs := q.Requests()[n:]; len(reqs) != 2 {
		t.Errorf("the payment and its invoice cost %d reads, want 2: %q", len(reqs), reqs)
	}
	got = s.all()
	if len(got) != 2 {
		t.Fatalf("after the legacy delivery: %d changes", len(got))
	}
	if inv := decodeInvoice(t, got[1].After); inv.Status != "paid" || inv.SettledVia != "card" || got[1].Before == nil {
		t.Errorf("the payment's change: %+v", inv)
	}

	// An update of an invoice this company's state never held is left
	// to change data capture, which announces it raised.
	n, before := len(q.Requests()), len(s.all())
	update := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Invoice", ID: "2", Operation: "Update", At: epoch})
	if code, _ := q.Notify(srv.URL, update); code != http.StatusOK || len(q.Requests()) != n || len(s.all()) != before {
		t.Errorf("an update of an invoice never seen: %d, %d reads, %d changes", code, len(q.Requests())-n, len(s.all())-before)
	}

	n = len(q.Requests())
	other := vendortest.QuickBooksLegacy("1234", vendortest.QBEvent{Entity: "Invoice", ID: "1", Operation: "Update", At: epoch})
	if code, _ := q.Notify(srv.URL, other); code != http.StatusOK || len(q.Requests()) != n {
		t.Errorf("another company's event: %d, %d reads", code, len(q.Requests())-n)
	}
}

// A Fault becomes an error that carries none of the vendor's text; 610 is
// not found; a 429 stops every call for 60 s.
func TestFaultsAndThrottling(t *testing.T) {
	q := fixture(t, 3)
	clock := vendortest.NewClock(epoch)
	a := newAdapter(t, q, clock)
	q.Faults.Queue(vendortest.Fault{Status: http.StatusBadRequest, Body: vendortest.QuickBooksFault("ValidationFault", "2010", "Secret vendor words")})
	_, err := a.Get(context.Background(), live, practice.Invoices, "inv_qb-1")
	if !errors.Is(err, practice.ErrBadUpstream) || strings.Contains(err.Error(), "Secret") || strings.Contains(err.Error(), "vendor") {
		t.Errorf("a ValidationFault: %v", err)
	}
	q.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, Body: vendortest.QuickBooksThrottled})
	_, err = a.Get(context.Background(), live, practice.Invoices, "inv_qb-1")
	wait, ok := practice.RetryAfter(err)
	if !errors.Is(err, practice.ErrUnavailable) || !ok || wait != time.Minute {
		t.Fatalf("a 429: %v (wait %s)", err, wait)
	}
	hits := q.Faults.Hits()
	clock.Advance(59 * time.Second)
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_qb-1"); !errors.Is(err, practice.ErrUnavailable) || q.Faults.Hits() != hits {
		t.Errorf("within the minute: %v, %d calls sent", err, q.Faults.Hits()-hits)
	}
	clock.Advance(2 * time.Second)
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_qb-1"); err != nil {
		t.Errorf("after the minute: %v", err)
	}
}

// A connection whose grant the company revoked needs reconnecting: the
// AuthenticationFault drops the token, and the refresh is refused.
func TestRevokedGrantNeedsReconnect(t *testing.T) {
	q := fixture(t, 1)
	redirect := "https://gw.example/connect/callback"
	q.Identity.AllowRedirect(redirect)
	rt := consent(t, q, redirect)
	var reason string
	cfg := quickbooks.Config{Firm: live.Firm, RealmID: q.RealmID, BaseURL: q.URL,
		OAuth2: upstream.OAuth2Config{ClientID: q.Identity.ClientID, ClientSecret: q.Identity.ClientSecret,
			RefreshToken: rt, TokenURL: q.Identity.TokenURL()}}
	a, err := quickbooks.New(cfg, upstream.Deps{State: changes.NewMemoryState(), GrantRefused: func(r string) { reason = r }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_qb-1"); err != nil {
		t.Fatalf("with the consent's token: %v", err)
	}
	if g := q.Identity.Grants(); len(g) != 1 || g[0].Refreshes != 1 {
		t.Fatalf("grants %+v", g)
	}
	q.Identity.RevokeAll()
	_, err = a.Get(context.Background(), live, practice.Invoices, "inv_qb-1")
	if !errors.Is(err, practice.ErrNeedsReconnect) || reason == "" {
		t.Fatalf("after revocation: %v (told %q)", err, reason)
	}
}

// consent runs the consent with PKCE and returns the refresh token, and
// checks that the callback names the company.
func consent(t *testing.T, q *vendortest.QuickBooks, redirect string) string {
	t.Helper()
	verifier := "v-0123456789012345678901234567890123456789012"
	u := q.Identity.AuthorizeURL() + "?" + strings.Join([]string{"response_type=code", "client_id=" + q.Identity.ClientID,
		"redirect_uri=" + redirect, "state=s1", "scope=" + quickbooks.Scope, "code_challenge=" + challenge(verifier),
		"code_challenge_method=S256"}, "&")
	back, err := q.Identity.Allow(u)
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("realmId") != q.RealmID || back.Query().Get("code") == "" {
		t.Fatalf("the callback %s names no company", back)
	}
	return exchange(t, q, back.Query().Get("code"), verifier, redirect)
}
