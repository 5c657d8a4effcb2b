package xero_test

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

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

var (
	live  = practice.Tenant{Firm: "frm_acme"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

const webhookKey = "OSd0eLlVIY9ZhViEqlDUh4+6n6M+Lo+eDaEJheJ6OCCgWwIz2D3JIAU6jPMipHRbgKTLz2uJ+xiACXGDBLrgdA=="

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

func invID(i int) string { return fmt.Sprintf("d4956132-ed94-4dd7-9eaa-%012d", i) }

// fixture holds 230 sales invoices and 20 bills.
func fixture(t *testing.T) *vendortest.Xero {
	t.Helper()
	x := vendortest.StartXero(t)
	for i := range 250 {
		inv := vendortest.XeroInvoice{InvoiceID: invID(i), InvoiceNumber: fmt.Sprintf("INV-%04d", i), Status: "AUTHORISED",
			ContactID: fmt.Sprintf("a3675fc4-f8dd-4f03-ba5b-%012d", i%7), ContactName: "Barney Rubble",
			Date: epoch.AddDate(0, 0, -30), DueDate: epoch.AddDate(0, 0, -2), Total: "1607.13", AmountDue: "1607.13",
			CurrencyCode: "GBP", Updated: epoch.Add(time.Duration(i) * time.Minute)}
		if i%12 == 11 {
			inv.Type = "ACCPAY"
		}
		x.AddInvoice(inv)
	}
	return x
}

func newAdapter(t *testing.T, x *vendortest.Xero, edit ...func(*xero.Config)) *xero.Adapter {
	t.Helper()
	return newAdapterDeps(t, x, upstream.Deps{}, edit...)
}

// newAdapterDeps is newAdapter with deps (its Clock is the test's).
func newAdapterDeps(t *testing.T, x *vendortest.Xero, deps upstream.Deps, edit ...func(*xero.Config)) *xero.Adapter {
	t.Helper()
	cfg := xero.Config{Firm: "frm_acme", TenantID: x.TenantID, BaseURL: x.URL, WebhookKey: webhookKey,
		OAuth2:   upstream.OAuth2Config{AccessToken: x.Token},
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
	for _, e := range edit {
		e(&cfg)
	}
	deps.Clock = vendortest.NewClock(epoch)
	a, err := xero.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func listAll(t *testing.T, a *xero.Adapter, f practice.Filter, limit int) []practice.Invoice {
	t.Helper()
	var out []practice.Invoice
	cursor := ""
	seen := map[string]bool{}
	for range 100 {
		p, err := a.List(context.Background(), live, practice.Invoices, practice.Query{Filter: f, Cursor: cursor, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range p.Items {
			var inv practice.Invoice
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&inv); err != nil {
				t.Fatal(err)
			}
			if seen[inv.ID] {
				t.Fatalf("%s twice", inv.ID)
			}
			seen[inv.ID] = true
			out = append(out, inv)
		}
		if !p.HasMore {
			return out
		}
		cursor = p.Next
	}
	t.Fatal("paging never ended")
	return nil
}

func TestListAcrossXeroPages(t *testing.T) {
	x := fixture(t)
	a := newAdapter(t, x)
	for _, limit := range []int{1, 40, 200} {
		if limit == 1 {
			continue // 230 round trips prove nothing more than 40 do
		}
		got := listAll(t, a, practice.Filter{}, limit)
		if len(got) != 230 {
			t.Fatalf("limit %d: %d invoices, want the 230 sales invoices", limit, len(got))
		}
		if got[0].Total != (practice.Money{Amount: "1607.13", Currency: "GBP"}) || got[0].Status != "issued" ||
			got[0].IssuedOn != "2026-01-31" || got[0].DueOn != "2026-02-28" || got[0].Client != nil {
			t.Fatalf("first invoice %+v", got[0])
		}
	}
	recent := listAll(t, a, practice.Filter{UpdatedSince: epoch.Add(200 * time.Minute)}, 20)
	if len(recent) != 46 {
		t.Fatalf("%d invoices updated since, want 46", len(recent))
	}
}

func TestStatuses(t *testing.T) {
	x := vendortest.StartXero(t)
	a := newAdapter(t, x)
	cases := []struct {
		status, total, due, paid string
		pay                      bool
		want, settled            string
	}{
		{"DRAFT", "100.00", "100.00", "", false, "draft", ""},
		{"SUBMITTED", "100.00", "100.00", "", false, "awaiting_approval", ""},
		{"AUTHORISED", "100.00", "100.00", "", false, "issued", ""},
		{"AUTHORISED", "100.00", "40.00", "60.00", false, "partially_paid", ""},
		{"PAID", "46.0", "0.0", "46.0", true, "paid", "gocardless"},
		{"VOIDED", "40", "0", "", false, "void", ""},
		{"DELETED", "40", "40", "", false, "void", ""},
	}
	for i, tc := range cases {
		inv := vendortest.XeroInvoice{InvoiceID: invID(i), Status: tc.status, Total: tc.total, AmountDue: tc.due,
			AmountPaid: tc.paid, CurrencyCode: "NZD", Date: epoch, DueDate: epoch.AddDate(0, 1, 0), Updated: epoch}
		if tc.pay {
			inv.Payments = []vendortest.XeroPayment{{PaymentID: "p1", Date: epoch.Add(time.Hour), Amount: "46.0", Reference: "GoCardless payout 12"}}
			inv.FullyPaidOn = epoch.Add(time.Hour)
		}
		x.AddInvoice(inv)
		raw, err := a.Get(context.Background(), live, practice.Invoices, "inv_"+invID(i))
		if err != nil {
			t.Fatal(err)
		}
		var got practice.Invoice
		json.Unmarshal(raw, &got)
		if got.Status != tc.want || got.SettledVia != tc.settled || (got.PaidAt != nil) != tc.pay {
			t.Errorf("%s: %+v", tc.status, got)
		}
		if tc.want == "draft" && got.IssuedOn != "" {
			t.Errorf("a draft has issued_on %s", got.IssuedOn)
		}
	}
}

func TestGetAndErrors(t *testing.T) {
	x := fixture(t)
	a := newAdapter(t, x)
	ctx := context.Background()
	if _, err := a.Get(ctx, live, practice.Invoices, "inv_"+invID(11)); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("a bill: %v", err)
	}
	for _, id := range []string{"inv_" + invID(999), "inv_nope", "inv_../../Contacts", "cli_1"} {
		if _, err := a.Get(ctx, live, practice.Invoices, id); !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
	wrongTenant := newAdapter(t, x, func(c *xero.Config) { c.TenantID = "00000000-0000-0000-0000-000000000000" })
	if _, err := wrongTenant.Get(ctx, live, practice.Invoices, "inv_"+invID(1)); !errors.Is(err, practice.ErrUnavailable) {
		t.Fatalf("wrong tenant: %v", err)
	}
	x.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"Invoices":[{"InvoiceID":"` + invID(1) + `","Type":"ACCREC","Status":"PAID","Total":"lots","CurrencyCode":"GBP"}]}`})
	if _, err := a.Get(ctx, live, practice.Invoices, "inv_"+invID(1)); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("malformed: %v", err)
	}
	x.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "59",
		Body: `{"Title":"Too Many Requests"}`})
	if _, err := a.List(ctx, live, practice.Invoices, practice.Query{Limit: 5}); !errors.Is(err, practice.ErrUnavailable) {
		t.Fatalf("minute limit: %v", err)
	} else if ra, _ := practice.RetryAfter(err); ra != 59*time.Second {
		t.Fatalf("retry after %v", ra)
	}
	if p, err := a.List(ctx, live, practice.Jobs, practice.Query{Limit: 5}); err != nil || len(p.Items) != 0 {
		t.Fatalf("jobs from a ledger: %+v %v", p, err)
	}
}

// TestMalformedAnswers checks that an answer out of Xero's shape is a bad
// upstream, whether listed or read alone.
func TestMalformedAnswers(t *testing.T) {
	x := fixture(t)
	a := newAdapter(t, x)
	ctx := context.Background()
	for _, body := range []string{
		``, `<html>`, `{"Invoices": [`, `{"Invoices": {}}`, `{"Invoices": [{"InvoiceID": 7}]}`,
		`{"Invoices": [{"InvoiceID": "` + invID(1) + `", "Type": "ACCREC", "Total": {"Value": 1}}]}`,
		`{"Invoices": [{"InvoiceID": "` + invID(1) + `", "Type": "ACCREC", "LineItems": [{"Tracking": [1,]}]}]}`,
		`{"Invoices": []} {"Invoices": []}`,
	} {
		x.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: body})
		if _, err := a.List(ctx, live, practice.Invoices, practice.Query{Limit: 5}); !errors.Is(err, practice.ErrBadUpstream) {
			t.Errorf("list %q: %v", body, err)
		}
		x.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: body})
		if _, err := a.Get(ctx, live, practice.Invoices, "inv_"+invID(1)); !errors.Is(err, practice.ErrBadUpstream) {
			t.Errorf("get %q: %v", body, err)
		}
	}
}

// resolver is a records system that holds Xero contact ids as its
// cross-reference; asked are the contact ids it was asked about.
type resolver struct {
	mu    sync.Mutex
	ids   map[string]string
	asked []string
}

func (r *resolver) LinkClient(_ context.Context, _ practice.Tenant, c linking.Candidate) (linking.Link, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, c.External)
	if id := r.ids[c.External]; id != "" {
		return linking.Link{Client: id, Outcome: linking.Linked}, nil
	}
	return linking.Link{}, nil
}

func TestClientLinking(t *testing.T) {
	x := fixture(t)
	cfg := xero.Config{Firm: "frm_acme", TenantID: x.TenantID, BaseURL: x.URL, OAuth2: upstream.OAuth2Config{AccessToken: x.Token}}
	r := &resolver{ids: map[string]string{"a3675fc4-f8dd-4f03-ba5b-000000000003": "cli_o-O003"}}
	state := changes.NewMemoryState()
	clock := vendortest.NewClock(time.Now())
	a, err := xero.New(cfg, upstream.Deps{State: state, Clock: clock}, xero.WithClientLinker(r))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func(id string) (practice.Invoice, json.RawMessage) {
		t.Helper()
		raw, err := a.Get(ctx, live, practice.Invoices, id)
		if err != nil {
			t.Fatal(err)
		}
		var inv practice.Invoice
		if err := json.Unmarshal(raw, &inv); err != nil {
			t.Fatal(err)
		}
		return inv, raw
	}
	if inv, _ := get("inv_" + invID(3)); practice.ValueOf(inv.Client) != "cli_o-O003" {
		t.Fatalf("linked client %v", inv.Client)
	}
	// A contact the records system has no client for names none: null,
	// never an id of Xero's that /v1/clients would answer 404 to.
	id := "inv_" + invID(5)
	before, raw := get(id)
	if before.Client != nil || !strings.Contains(string(raw), `"client":null`) {
		t.Fatalf("unlinked invoice %s", raw)
	}
	contact := r.asked[len(r.asked)-1]
	if contact == "" {
		t.Fatal("the contact id was not asked about")
	}
	// The read model kept it so; then the client is made in the records
	// system: the invoice links, its version moves past the one served
	// (Xero's has not), and stays there on every later read.
	if err := state.Save(ctx, changes.StateKey(live, practice.Invoices, id), raw); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	r.mu.Lock()
	r.ids[contact] = "cli_o-O005"
	r.mu.Unlock()
	after, raw := get(id)
	if practice.ValueOf(after.Client) != "cli_o-O005" || after.Version <= before.Version || after.UpdatedAt.Before(before.UpdatedAt) {
		t.Fatalf("late link: before %+v\nafter %+v", before, after)
	}
	if err := state.Save(ctx, changes.StateKey(live, practice.Invoices, id), raw); err != nil {
		t.Fatal(err)
	}
	if again, _ := get(id); again.Version != after.Version || !again.UpdatedAt.Equal(after.UpdatedAt) {
		t.Fatalf("read again: version %d, was %d", again.Version, after.Version)
	}
}

func post(h http.Handler, body []byte, sig string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/ingest/xero", strings.NewReader(string(body)))
	r.Header.Set("x-xero-signature", sig)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestIntentToReceive(t *testing.T) {
	x := fixture(t)
	a := newAdapter(t, x)
	h := a.Webhook(&sink{})
	body := vendortest.XeroWebhook(x.TenantID, epoch)
	if w := post(h, body, vendortest.SignXero(webhookKey, body)); w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Fatalf("correctly signed: %d %q", w.Code, w.Body.String())
	}
	for name, sig := range map[string]string{
		"incorrectly signed":        vendortest.SignXero("not-the-key", body),
		"signature of another body": vendortest.SignXero(webhookKey, []byte(`{"events":[]}`)),
		"unsigned":                  "",
	} {
		if w := post(h, body, sig); w.Code != http.StatusUnauthorized || w.Body.Len() != 0 {
			t.Errorf("%s: %d %q", name, w.Code, w.Body.String())
		}
	}
}

// backfilled is an adapter whose state store holds what its List gives
// for every invoice, as the read model's backfill leaves it before any
// webhook is compared with it.
func backfilled(t *testing.T, x *vendortest.Xero) *xero.Adapter {
	t.Helper()
	state := changes.NewMemoryState()
	a := newAdapterDeps(t, x, upstream.Deps{State: state})
	for _, raw := range vendortest.ListAll(t, a, live, practice.Invoices, practice.Filter{}, 200) {
		var v struct{ ID string }
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if err := state.Save(context.Background(), changes.StateKey(live, practice.Invoices, v.ID), raw); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func TestInvoicePaidInXero(t *testing.T) {
	x := fixture(t)
	// The gateway starts watching the organisation: its backfill
	// remembers every invoice.
	a := backfilled(t, x)
	s := &sink{}
	h := a.Webhook(s)
	send := func(at time.Time, ids ...string) {
		t.Helper()
		body := vendortest.XeroWebhook(x.TenantID, at, ids...)
		if w := post(h, body, vendortest.SignXero(webhookKey, body)); w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
	}
	send(epoch.Add(time.Hour), invID(5)) // an update that changed nothing
	x.Pay(invID(5), "Stripe payout po_123", epoch.Add(time.Hour))
	send(epoch.Add(2*time.Hour), invID(5))
	send(epoch.Add(2*time.Hour), invID(5)) // Xero retries
	other := vendortest.XeroWebhook("11111111-2222-3333-4444-555555555555", epoch, invID(6))
	post(h, other, vendortest.SignXero(webhookKey, other))
	if len(s.changes) != 1 {
		t.Fatalf("%d changes, want 1", len(s.changes))
	}
	c := s.changes[0]
	var before, after practice.Invoice
	json.Unmarshal(c.Before, &before)
	json.Unmarshal(c.After, &after)
	if c.Kind != practice.Invoices || c.ResourceID != "inv_"+invID(5) || before.Status != "issued" || after.Status != "paid" ||
		after.SettledVia != "stripe" || after.PaidAt == nil || !after.PaidAt.Equal(epoch.Add(time.Hour)) ||
		after.AmountDue.Amount != "0.00" || c.Firm != "frm_acme" {
		t.Fatalf("change %+v\nbefore %+v\nafter %+v", c, before, after)
	}
}

func TestWebhookForgedPaymentRefused(t *testing.T) {
	x := fixture(t)
	a := newAdapter(t, x)
	s := &sink{}
	body := vendortest.XeroWebhook(x.TenantID, epoch, invID(5))
	forged := strings.Replace(string(body), invID(5), invID(7), 1)
	if w := post(a.Webhook(s), []byte(forged), vendortest.SignXero(webhookKey, body)); w.Code != http.StatusUnauthorized {
		t.Fatalf("a body changed after signing: %d", w.Code)
	}
	if len(s.changes) != 0 || x.Faults.Hits() != 0 {
		t.Fatal("a forged webhook reached Xero or the sink")
	}
}

func TestWebhookXeroDown(t *testing.T) {
	x := fixture(t)
	a := newAdapter(t, x, func(c *xero.Config) { c.Upstream.MaxAttempts = 1 })
	x.Faults.Down(vendortest.Fault{Status: http.StatusServiceUnavailable})
	body := vendortest.XeroWebhook(x.TenantID, epoch, invID(5))
	if w := post(a.Webhook(&sink{}), body, vendortest.SignXero(webhookKey, body)); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503 so that Xero sends it again", w.Code)
	}
}

// A body handled within the hour is acknowledged without reading Xero:
// with Xero down, its replay still answers 200, while a new notification
// (which must be read) answers 503.
func TestWebhookReplayNotReadAgain(t *testing.T) {
	x := fixture(t)
	a := backfilled(t, x)
	h := a.Webhook(&sink{})
	body := vendortest.XeroWebhook(x.TenantID, epoch.Add(time.Hour), invID(5))
	if w := post(h, body, vendortest.SignXero(webhookKey, body)); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	x.Faults.Down(vendortest.Fault{Status: http.StatusInternalServerError})
	if w := post(h, body, vendortest.SignXero(webhookKey, body)); w.Code != http.StatusOK {
		t.Fatalf("a replay read Xero again: status %d", w.Code)
	}
	if w := post(h, body, vendortest.SignXero("not the key", body)); w.Code != http.StatusUnauthorized {
		t.Fatalf("a replay with a forged signature: status %d", w.Code)
	}
	later := vendortest.XeroWebhook(x.TenantID, epoch.Add(2*time.Hour), invID(5))
	if w := post(h, later, vendortest.SignXero(webhookKey, later)); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a new notification with Xero down: status %d, want 503", w.Code)
	}
}
