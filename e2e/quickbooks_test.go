package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// qboCompany is a QuickBooks Online double holding n open invoices
// (inv_qb-1 ...), and the Caddyfile of a gateway whose frm_birch keeps
// its ledger there, with Intuit's webhooks mounted as an ingest route.
func qboCompany(t *testing.T, n int) (*vendortest.QuickBooks, string) {
	t.Helper()
	q := vendortest.StartQuickBooks(t)
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		q.AddInvoice(vendortest.QBInvoice{ID: fmt.Sprint(i), DocNumber: fmt.Sprintf("%05d", i), CustomerID: fmt.Sprint(1 + i%40),
			CustomerName: fmt.Sprintf("Customer %d", 1+i%40), TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "1250.00", Updated: epoch})
	}
	caddyfile := fmt.Sprintf(`{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}
		firm frm_birch {
			name "Birch Street CPAs"
			ledger quickbooks {
				realm_id %s
				access_token {env.TEST_QBO_TOKEN}
				base_url %s
				verifier_token {env.TEST_QBO_VERIFIER_TOKEN}
				settlement_rail "Stripe" stripe
				rate_limited_wait 2s
				upstream {
					daily_limit -1
				}
			}
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	handle /ingest/frm_birch/quickbooks {
		practicegw_ingest frm_birch ledger
	}
	handle /v1/openapi.json {
		practicegw_api
	}
	handle /v1/* {
		practicegw_auth
		practicegw_ratelimit
		practicegw_api
	}
	handle {
		practicegw_api
	}
}
`, q.RealmID, q.URL)
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return q, path
}

func qboEnv(q *vendortest.QuickBooks) []string {
	return []string{"TEST_QBO_TOKEN=" + q.Token, "TEST_QBO_VERIFIER_TOKEN=" + q.VerifierToken, "PRACTICEGW_SYNC_POLL=1s"}
}

// invoiceQueries are the invoice queries QuickBooks answered, as their
// query statements.
func invoiceQueries(q *vendortest.QuickBooks) []string {
	var out []string
	for _, r := range q.Requests() {
		_, raw, _ := strings.Cut(r, "?")
		v, _ := url.ParseQuery(raw)
		if stmt := v.Get("query"); strings.HasPrefix(stmt, "select * from Invoice") {
			out = append(out, stmt)
		}
	}
	return out
}

// TestQuickBooksLedger: a US firm's ledger in QuickBooks Online, from
// its Caddyfile: the backfill reads 2,500 invoices in three queries of
// 1,000; Intuit's CloudEvents and legacy webhooks each raise their event
// within a second (a payment as invoice.paid with how it was settled); a
// deletion found by change data capture raises invoice.deleted and leaves
// a tombstone; a forged signature reads nothing; a 429 is waited out with
// no 5xx to callers.
func TestQuickBooksLedger(t *testing.T) {
	q, config := qboCompany(t, 2500)
	g := startGateway(t, gatewayOptions{config: config, env: qboEnv(q)})
	waitSyncs(t, g, 30*time.Second, "the QuickBooks sync to be live", allLive)
	want := []string{"select * from Invoice STARTPOSITION 1 MAXRESULTS 1000", "select * from Invoice STARTPOSITION 1001 MAXRESULTS 1000",
		"select * from Invoice STARTPOSITION 2001 MAXRESULTS 1000"}
	if got := invoiceQueries(q); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the backfill's queries: %q, want %q", got, want)
	}
	tok := g.issue("frm_birch", false, allReadWrite...).Token
	invoices := pageAll(t, g, tok, "/v1/invoices", 200)
	if len(invoices) != 2500 || invoices[0]["status"] != "issued" || invoices[0]["total"].(map[string]any)["currency"] != "USD" {
		t.Fatalf("%d invoices, first %v", len(invoices), invoices[0])
	}
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "invoice.raised", "invoice.paid", "invoice.deleted")
	rc.setSecrets(secret)
	ingest := "/ingest/frm_birch/quickbooks"
	post := func(body []byte, sig string) int {
		t.Helper()
		return postSigned(t, g, ingest, body, "intuit-signature", sig)
	}

	// A forged signature is refused before anything is read.
	reads := len(q.Requests())
	now := time.Now().UTC()
	forged := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Invoice", ID: "12", Operation: "Update", At: now})
	if code := post(forged, vendortest.SignQuickBooks("not the verifier token", forged)); code != http.StatusUnauthorized {
		t.Fatalf("a forged webhook answered %d", code)
	}

	// A new invoice, told in the CloudEvents format.
	q.AddInvoice(vendortest.QBInvoice{ID: "2501", DocNumber: "02501", CustomerID: "3", CustomerName: "Customer 3",
		TxnDate: now, DueDate: now.AddDate(0, 1, 0), Total: "480.00", Updated: now})
	body := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Invoice", ID: "2501", Operation: "Create", At: now})
	sent := time.Now()
	if code := post(body, vendortest.SignQuickBooks(q.VerifierToken, body)); code != http.StatusOK {
		t.Fatalf("the CloudEvents webhook answered %d", code)
	}
	got := rc.wait(1, 5*time.Second)
	if e := got[0].envelope; e["event"] != "invoice.raised" || e["data"].(map[string]any)["invoice_id"] != "inv_qb-2501" {
		t.Fatalf("after the CloudEvents webhook: %s", got[0].body)
	}
	if d := got[0].at.Sub(sent); d > time.Second {
		t.Errorf("invoice.raised arrived %s after the webhook, want within a second", d)
	}

	// A payment, told in the legacy format.
	pay := q.Pay("7", "Other", "Stripe payout po_1", time.Now().UTC())
	body = vendortest.QuickBooksLegacy(q.RealmID, vendortest.QBEvent{Entity: "Payment", ID: pay, Operation: "Create", At: time.Now().UTC()})
	sent = time.Now()
	if code := post(body, vendortest.SignQuickBooks(q.VerifierToken, body)); code != http.StatusOK {
		t.Fatalf("the legacy webhook answered %d", code)
	}
	got = rc.wait(2, 5*time.Second)
	data := got[1].envelope["data"].(map[string]any)
	if got[1].envelope["event"] != "invoice.paid" || data["invoice_id"] != "inv_qb-7" || data["settled_via"] != "stripe" {
		t.Fatalf("after the legacy webhook: %s", got[1].body)
	}
	if d := got[1].at.Sub(sent); d > time.Second {
		t.Errorf("invoice.paid arrived %s after the webhook, want within a second", d)
	}
	for _, r := range q.Requests()[reads:] {
		if strings.Contains(r, "/invoice/12") {
			t.Errorf("the forged webhook's invoice was read: %s", r)
		}
	}

	// A deletion, found by change data capture alone.
	deletedFrom := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	q.Delete("9", time.Now().UTC())
	got = rc.wait(3, 15*time.Second)
	data = got[2].envelope["data"].(map[string]any)
	if got[2].envelope["event"] != "invoice.deleted" || data["invoice_id"] != "inv_qb-9" {
		t.Fatalf("after the deletion: %s", got[2].body)
	}
	if r := g.do(t, "GET", "/v1/invoices/inv_qb-9", tok, nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("inv_qb-9 after its deletion: %d %s", r.StatusCode, r.body)
	}
	var tomb map[string]any
	for _, item := range pageAll(t, g, tok, "/v1/invoices?include_deleted=true&updated_since="+url.QueryEscape(deletedFrom), 200) {
		if item["id"] == "inv_qb-9" {
			tomb = item
		}
	}
	if tomb == nil || tomb["deleted"] != true {
		t.Fatalf("no tombstone of inv_qb-9: %v", tomb)
	}
	for _, r := range q.Requests()[reads:] {
		if strings.Contains(r, "STARTPOSITION") && strings.Contains(r, "Invoice") {
			t.Errorf("a full query after the backfill: %s", r)
		}
	}

	// A 429: the sync waits it out, callers read the copy meanwhile.
	hits := q.Faults.Hits()
	q.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, Body: vendortest.QuickBooksThrottled})
	eventually.True(t, 10*time.Second, poll, "the next change data capture call to meet the 429", func() bool {
		return q.Faults.Hits() > hits
	})
	throttled := time.Now()
	q.Change("11", "999.00", time.Now().UTC())
	// Callers read throughout the wait, a few times a second (within
	// their credential's own rate).
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for time.Since(throttled) < 2*time.Second {
		if r := g.do(t, "GET", "/v1/invoices?limit=5", tok, nil); r.StatusCode != http.StatusOK {
			t.Fatalf("a read while QuickBooks throttles: %d %s", r.StatusCode, r.body)
		}
		<-tick.C
	}
	eventually.True(t, 15*time.Second, poll, "the change after the 429 to be read", func() bool {
		r := g.do(t, "GET", "/v1/invoices/inv_qb-11", tok, nil)
		return r.StatusCode == http.StatusOK && r.json(t)["total"].(map[string]any)["amount"] == "999.00"
	})
	if d := time.Since(throttled); d < 2*time.Second {
		t.Errorf("the change was read %s after the 429, within the 2 s it asked", d)
	}

	// A Fault: the sync says it fails, in the gateway's words alone.
	hits = q.Faults.Hits()
	q.Faults.Down(vendortest.Fault{Status: http.StatusBadRequest,
		Body: vendortest.QuickBooksFault("ValidationFault", "2010", "Request has invalid or unsupported property BirchSecret")})
	waitSyncs(t, g, 15*time.Second, "the sync to fail on the Fault", func(s map[string]string) bool {
		return q.Faults.Hits() > hits && !strings.HasPrefix(s["quickbooks"], "live")
	})
	for _, path := range []string{"/readyz", "/v1/invoices?limit=5", "/v1/invoices/inv_qb-11"} {
		r := g.do(t, "GET", path, tok, nil)
		if strings.Contains(string(r.body), "BirchSecret") || strings.Contains(string(r.body), "invalid or unsupported") || r.StatusCode >= 500 && path != "/readyz" {
			t.Errorf("GET %s during the Fault: %d %s", path, r.StatusCode, r.body)
		}
	}
	q.Faults.Up()
}

// TestQuickBooksTwoGatewaysReadEachChangeOnce: two gateways on one Redis
// backfill once between them, and a webhook delivered to both (Intuit
// retries to whichever answers) reads the invoice once and raises one
// event.
func TestQuickBooksTwoGatewaysReadEachChangeOnce(t *testing.T) {
	redis := redistest.Start(t)
	q, config := qboCompany(t, 1200)
	env := append(qboEnv(q), "PRACTICEGW_REDIS="+redis.URL(), "PRACTICEGW_SECRETS_KEY="+secretsKey())
	a := startGateway(t, gatewayOptions{config: config, env: env})
	b := startGateway(t, gatewayOptions{config: config, env: env})
	waitSyncs(t, a, 30*time.Second, "the sync to be live on A", allLive)
	waitSyncs(t, b, 30*time.Second, "the sync to be live on B", allLive)
	if got := invoiceQueries(q); len(got) != 2 {
		t.Fatalf("the backfill of two gateways made %d invoice queries, want 2 (1,200 invoices): %q", len(got), got)
	}
	tok := a.issue("frm_birch", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, a, tok, rc.url(), "invoice.paid")
	rc.setSecrets(secret)

	cdcCalls := func() (n int) {
		for _, r := range q.Requests() {
			if strings.Contains(r, "/cdc?") {
				n++
			}
		}
		return n
	}
	polled := cdcCalls()
	pay := q.Pay("21", "Visa", "", time.Now().UTC())
	body := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Payment", ID: pay, Operation: "Create", At: time.Now().UTC()})
	sig := vendortest.SignQuickBooks(q.VerifierToken, body)
	for _, g := range []*gateway{a, b, a} {
		if code := postSigned(t, g, "/ingest/frm_birch/quickbooks", body, "intuit-signature", sig); code != http.StatusOK {
			t.Fatalf("the webhook to %s answered %d", g.addr, code)
		}
	}
	got := rc.wait(1, 5*time.Second)
	if data := got[0].envelope["data"].(map[string]any); data["invoice_id"] != "inv_qb-21" || data["settled_via"] != "card" {
		t.Fatalf("invoice.paid: %s", got[0].body)
	}
	paymentReads := 0
	for _, r := range q.Requests() {
		if strings.Contains(r, "/payment/"+pay) {
			paymentReads++
		}
	}
	if paymentReads != 1 {
		t.Errorf("the payment was read %d times for three deliveries to two gateways, want once", paymentReads)
	}
	// Change data capture sees the same payment on whichever gateway
	// holds the sync, and raises nothing more.
	eventually.True(t, 15*time.Second, poll, "two change data capture calls after the payment", func() bool {
		return cdcCalls() >= polled+2
	})
	for _, g := range []*gateway{a, b} {
		n := 0
		for _, e := range pageAll(t, g, tok, "/v1/events", 200) {
			if e["event"] == "invoice.paid" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s lists %d invoice.paid events, want 1", g.addr, n)
		}
	}
	if n := len(rc.wait(1, 0)); n != 1 {
		t.Errorf("%d invoice.paid deliveries, want 1", n)
	}
}
