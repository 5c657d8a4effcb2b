package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// refusedWith checks an answer is the contract's error body with status
// and code.
func refusedWith(t *testing.T, r response, status int, code, what string) {
	t.Helper()
	if r.StatusCode != status || r.errorCode(t) != code {
		t.Fatalf("%s: %d %s, want %d %s", what, r.StatusCode, tail(string(r.body), 300), status, code)
	}
}

// servesCopy checks that g answers the firm's invoices from the copy of
// its organisation alone, n of them whose numbers start with prefix, and
// says the copy's state.
func servesCopy(t *testing.T, g *gateway, tok string, n int, prefix, state string) error {
	t.Helper()
	r := g.do(t, "GET", "/v1/invoices?limit=100", tok, nil)
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", r.StatusCode, tail(string(r.body), 300))
	}
	if got := strings.Count(string(r.body), `"number":"`+prefix); got != n || strings.Count(string(r.body), `"number":"`) != n {
		return fmt.Errorf("%d invoices numbered %s… of %d: %s", got, prefix, strings.Count(string(r.body), `"number":"`), tail(string(r.body), 300))
	}
	if s := r.Header.Get("Data-State"); s != state {
		return fmt.Errorf("Data-State %q, want %q", s, state)
	}
	return nil
}

// TestARoleServesOnlyTheFirmsOrganisation is a firm whose block sets no
// role, on two gateways sharing Redis: before anything is connected, and
// while its first consent is awaited, its reads answer
// system_not_connected on both (never the demo records); once connected,
// a reconnect's pending consent and a denied one leave both serving the
// organisation's copy, failing; the consent given again serves it live.
func TestARoleServesOnlyTheFirmsOrganisation(t *testing.T) {
	redis := redistest.Start(t)
	addrA := freePort(t)
	f := startConnectFirm(t, addrA)
	env := []string{"PRACTICEGW_REDIS=" + redis.URL(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}
	a := f.gateway(t, addrA, env...)
	b := f.gateway(t, "", env...)
	both := []*gateway{a, b}
	rec := &seen{}
	tok := a.issue("frm_hollis", false, "admin", "invoices:read", "clients:read", "clients:write").Token
	admin := newConsentBrowser(t)

	for _, g := range both {
		refusedWith(t, g.do(t, "GET", "/v1/invoices", tok, nil), http.StatusConflict, "system_not_connected", "invoices with no ledger")
		refusedWith(t, g.do(t, "GET", "/v1/clients", tok, nil), http.StatusConflict, "system_not_connected", "clients with no records system")
		refusedWith(t, g.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Made Up Ltd", "type": "company"}),
			http.StatusConflict, "system_not_connected", "a client written with no records system")
	}

	created := connectionOf(t, rec.keep(a.do(t, "POST", "/v1/connections", tok, map[string]any{"role": "ledger", "system": "xero"})))
	id := created["id"].(string)
	for _, g := range both {
		// A second of looks at the store: the pending connection serves
		// nothing.
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			refusedWith(t, g.do(t, "GET", "/v1/invoices", tok, nil), http.StatusConflict, "system_not_connected",
				"invoices while the first consent is awaited")
			time.Sleep(50 * time.Millisecond)
		}
	}
	if done := connectionOf(t, callback(t, a, rec, admin, consent(t, f.x, admin, created["authorize_url"].(string)))); done["status"] != "connected" {
		t.Fatalf("after the consent: %v", done)
	}
	for _, g := range both {
		eventually.NoError(t, 30*time.Second, 20*time.Millisecond, "the organisation's invoices, live", func() error {
			return servesCopy(t, g, tok, 30, "INV-", "live")
		})
	}

	// A reconnect: within 2 s both serve the copy, failing, with the
	// connection's reason in the sync's why; while it is pending and
	// after the consent is denied.
	again := connectionOf(t, rec.keep(b.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"reconnect": true})))
	for _, g := range both {
		eventually.NoError(t, 2*time.Second, poll, "the copy, failing, while the reconnect is pending", func() error {
			return servesCopy(t, g, tok, 30, "INV-", "failing")
		})
		c := connectionOf(t, g.do(t, "GET", "/v1/connections/"+id, tok, nil))
		if syncs, _ := c["sync"].([]any); c["status"] != "pending" || len(syncs) != 1 || syncs[0].(map[string]any)["state"] != "paused" {
			t.Errorf("the connection while reconnecting: %v", c)
		}
	}
	denied, err := f.x.Identity.Deny(admin.start(t, again["authorize_url"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	refusedWith(t, callback(t, a, rec, admin, denied), http.StatusBadRequest, "consent_denied", "a denied consent")
	for _, g := range both {
		if err := servesCopy(t, g, tok, 30, "INV-", "failing"); err != nil {
			t.Errorf("after a denied consent: %v", err)
		}
	}
	third := connectionOf(t, rec.keep(a.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"reconnect": true})))
	if done := connectionOf(t, callback(t, b, rec, admin, consent(t, f.x, admin, third["authorize_url"].(string)))); done["status"] != "connected" {
		t.Fatalf("after the consent given again: %v", done)
	}
	for _, g := range both {
		eventually.NoError(t, 5*time.Second, poll, "the copy live again", func() error {
			return servesCopy(t, g, tok, 30, "INV-", "live")
		})
	}
	if reads := fullReads(f.x); len(reads) != 1 {
		t.Errorf("the invoices were read in full %d times: a reconnect to the same organisation backfilled", len(reads))
	}
}
