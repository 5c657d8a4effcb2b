package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// TestQuickBooksConnectedByConsent: a firm's administrator connects the
// firm's QuickBooks Online company as its ledger through the connect
// block's Intuit app (practicegw connect): the consent asks for the
// accounting scope, the company is the one the callback names, the
// invoices are served; Intuit's webhooks for every company arrive at the
// app's one address and reach the connection of theirs (another
// company's are acknowledged and read nothing); its estimates are the
// firm's engagements; a disconnect revokes the grant at Intuit.
func TestQuickBooksConnectedByConsent(t *testing.T) {
	addr := freePort(t)
	q := vendortest.StartQuickBooks(t)
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for i := 1; i <= 40; i++ {
		q.AddInvoice(vendortest.QBInvoice{ID: fmt.Sprint(i), DocNumber: fmt.Sprintf("%05d", i), CustomerID: "1", CustomerName: "Customer 1",
			TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "99.00", Updated: epoch})
	}
	for i, st := range []string{"Pending", "Accepted", "Rejected"} {
		q.AddEstimate(vendortest.QBEstimate{ID: fmt.Sprint(i + 1), DocNumber: fmt.Sprintf("E%03d", i+1), CustomerID: "1", CustomerName: "Customer 1",
			TxnDate: epoch, Lines: []string{"Bookkeeping"}, Total: "300.00", Status: st, Updated: epoch})
	}
	g := quickBooksGateway(t, q, addr)

	run := g.cliStart(t, nil, "connect", "--firm", "frm_birch", "--role", "ledger", "--system", "quickbooks")
	page := run.await(t, regexp.MustCompile(`^\s+(http://\S+/connect/start/\S+)$`), 10*time.Second)[1]
	br := newConsentBrowser(t)
	authorize := br.start(t, page)
	if !strings.Contains(authorize, "scope=com.intuit.quickbooks.accounting") {
		t.Fatalf("the consent asks %s", authorize)
	}
	redirect, err := q.Identity.Allow(authorize)
	if err != nil || redirect.Query().Get("realmId") != q.RealmID {
		t.Fatalf("Intuit's consent: %v %v", redirect, err)
	}
	if r := br.callback(t, g, redirect, "Accept", "text/html"); r.StatusCode != 200 {
		t.Fatalf("the callback page: %d %s", r.StatusCode, r.body)
	}
	if err := run.wait(t, 10*time.Second); err != nil {
		t.Fatalf("%v: %s%s", err, run.out.String(), run.stderr.String())
	}
	if out := run.out.String(); !regexp.MustCompile(`QuickBooks Online is connected for frm_birch as ledger \(con_\w+\)`).MatchString(out) {
		t.Fatalf("the command printed:\n%s", out)
	}
	tok := g.issue("frm_birch", false, allReadWrite...).Token
	eventually.True(t, 30*time.Second, poll, "the connected company's 40 invoices", func() bool {
		r := g.do(t, "GET", "/v1/invoices?limit=100", tok, nil)
		return r.StatusCode == 200 && strings.Count(string(r.body), `"inv_qb-`) == 40
	})
	// The company's estimates are the firm's engagements, as a Caddyfile
	// ledger's are: the firm has no records system that keeps proposals.
	var engs map[string]map[string]any
	eventually.NoError(t, 30*time.Second, poll, "the connected company's 3 estimates", func() error {
		r := g.do(t, "GET", "/v1/engagements?limit=2", tok, nil)
		if r.StatusCode != 200 {
			return fmt.Errorf("%d %s", r.StatusCode, r.body)
		}
		engs = byID(pageAll(t, g, tok, "/v1/engagements", 2))
		if len(engs) != 3 {
			return fmt.Errorf("%d engagements", len(engs))
		}
		return nil
	})
	if engs["eng_qb-2"]["status"] != "signed" || engs["eng_qb-3"]["status"] != "declined" || engs["eng_qb-1"]["scope"] != "Bookkeeping" {
		t.Fatalf("the connected company's estimates: %v", engs)
	}
	admin := g.issue("frm_birch", false, "admin").Token
	conns := g.do(t, "GET", "/v1/connections", admin, nil).json(t)["data"].([]any)
	conn := conns[0].(map[string]any)
	if conn["status"] != "connected" || conn["tenant_id"] != q.RealmID {
		t.Fatalf("the connection: %v", conn)
	}

	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "invoice.raised")
	rc.setSecrets(secret)
	q.AddInvoice(vendortest.QBInvoice{ID: "41", DocNumber: "00041", CustomerID: "1", CustomerName: "Customer 1",
		TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "12.00", Updated: time.Now().UTC()})
	hook := "/connect/webhooks/quickbooks"
	reads := len(q.Requests())
	other := vendortest.QuickBooksCloudEvents("4620816365188888888", vendortest.QBEvent{Entity: "Invoice", ID: "41", Operation: "Create", At: time.Now()})
	if code := postSigned(t, g, hook, other, "intuit-signature", vendortest.SignQuickBooks(q.VerifierToken, other)); code != http.StatusOK {
		t.Fatalf("another company's webhook answered %d", code)
	}
	for _, r := range q.Requests()[reads:] {
		if strings.Contains(r, "/invoice/41") {
			t.Fatalf("another company's event was read: %s", r)
		}
	}
	if code := postSigned(t, g, hook, other, "intuit-signature", vendortest.SignQuickBooks("forged", other)); code != http.StatusUnauthorized {
		t.Fatalf("a forged webhook answered %d", code)
	}
	body := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Invoice", ID: "41", Operation: "Create", At: time.Now()})
	sent := time.Now()
	if code := postSigned(t, g, hook, body, "intuit-signature", vendortest.SignQuickBooks(q.VerifierToken, body)); code != http.StatusOK {
		t.Fatalf("the company's webhook answered %d", code)
	}
	got := rc.wait(1, 5*time.Second)
	if got[0].envelope["data"].(map[string]any)["invoice_id"] != "inv_qb-41" || got[0].at.Sub(sent) > time.Second {
		t.Fatalf("invoice.raised %s after %s", got[0].body, got[0].at.Sub(sent))
	}

	grants := q.Identity.Grants()
	if r := g.do(t, "DELETE", "/v1/connections/"+conn["id"].(string), admin, nil); r.StatusCode/100 != 2 {
		t.Fatalf("disconnect: %d %s", r.StatusCode, r.body)
	}
	if len(grants) != 1 || !q.Identity.Revoked(grants[0].RefreshToken) {
		t.Fatalf("the grant after the disconnect: %+v", q.Identity.Grants())
	}
}

// quickBooksGateway runs a gateway at addr whose connect block registers
// the Intuit app of q, for firm frm_birch.
func quickBooksGateway(t *testing.T, q *vendortest.QuickBooks, addr string) *gateway {
	t.Helper()
	q.Identity.AllowRedirect("http://" + addr + "/connect/callback")
	caddyfile := fmt.Sprintf(`{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		connect {
			public_url http://%s
			quickbooks {
				client_id {env.TEST_QBO_CLIENT_ID}
				client_secret {env.TEST_QBO_CLIENT_SECRET}
				authorize_url %s
				token_url %s
				revoke_url %s
				base_url %s
				verifier_token {env.TEST_QBO_VERIFIER_TOKEN}
			}
		}
		firm frm_birch {
			name "Birch Street CPAs"
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	@vendor_webhooks path /ingest/* /connect/webhooks/*
	handle @vendor_webhooks {
		practicegw_ingest
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
`, addr, q.Identity.AuthorizeURL(), q.Identity.TokenURL(), q.Identity.RevokeURL(), q.URL)
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return startGateway(t, gatewayOptions{config: path, addr: addr, env: []string{"TEST_QBO_CLIENT_ID=" + q.Identity.ClientID,
		"TEST_QBO_CLIENT_SECRET=" + q.Identity.ClientSecret, "TEST_QBO_VERIFIER_TOKEN=" + q.VerifierToken, "PRACTICEGW_SYNC_POLL=1s"}})

}

// TestQuickBooksCallbackNamingAnotherCompanyIsRefused is the attack on a
// consent's callback: its realmId, which crosses the browser, changed to
// a company the grant does not reach. The gateway asks QuickBooks what
// the new token reaches before it keeps anything: the callback is
// refused (502 upstream_unavailable, the contract's answer to a consent
// the vendor did not complete), the connection stays pending with the
// reason and no company; a consent whose callback
// is as Intuit wrote it then connects the company, named as QuickBooks
// names it.
func TestQuickBooksCallbackNamingAnotherCompanyIsRefused(t *testing.T) {
	addr := freePort(t)
	q := vendortest.StartQuickBooks(t)
	g := quickBooksGateway(t, q, addr)
	admin := g.issue("frm_birch", false, "admin").Token
	r := g.do(t, "POST", "/v1/connections", admin, map[string]any{"role": "ledger", "system": "quickbooks"})
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("connect: %d %s", r.StatusCode, r.body)
	}
	conn := r.json(t)
	id := conn["id"].(string)
	br := newConsentBrowser(t)
	redirect, err := q.Identity.Allow(br.start(t, conn["authorize_url"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	edited := *redirect
	qs := edited.Query()
	qs.Set("realmId", "4620816365214937")
	edited.RawQuery = qs.Encode()
	if r := br.callback(t, g, &edited); r.StatusCode != http.StatusBadGateway || r.errorCode(t) != "upstream_unavailable" {
		t.Fatalf("a callback naming another company: %d %s", r.StatusCode, r.body)
	}
	got := g.do(t, "GET", "/v1/connections/"+id, admin, nil).json(t)
	if got["status"] != "pending" || got["tenant_id"] != nil || !strings.Contains(fmt.Sprint(got["reason"]), "organisation_not_reached") {
		t.Fatalf("the connection after the edited callback: %v", got)
	}
	if !strings.Contains(g.logs.String(), "names an organisation its grant does not reach") {
		t.Error("the refusal was not logged")
	}
	if strings.Contains(g.logs.String(), "connection consented") {
		t.Fatal("the edited callback's connection was consented")
	}

	r = g.do(t, "PATCH", "/v1/connections/"+id, admin, map[string]any{"reconnect": true})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("reconnect: %d %s", r.StatusCode, r.body)
	}
	redirect, err = q.Identity.Allow(br.start(t, r.json(t)["authorize_url"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	if r := br.callback(t, g, redirect); r.StatusCode != http.StatusOK {
		t.Fatalf("the callback as Intuit wrote it: %d %s", r.StatusCode, r.body)
	}
	got = g.do(t, "GET", "/v1/connections/"+id, admin, nil).json(t)
	if got["status"] != "connected" || got["tenant_id"] != q.RealmID || got["tenant_name"] != "Birch Street CPAs" {
		t.Fatalf("the connection: %v", got)
	}
}
