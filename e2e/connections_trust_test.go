package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// twoConnectGateways are two gateways of a firm with only a name,
// sharing one Redis; the vendors send the administrator back to a.
func twoConnectGateways(t *testing.T) (f *connectFirm, a, b *gateway) {
	t.Helper()
	redis := redistest.Start(t)
	addrA := freePort(t)
	f = startConnectFirm(t, addrA)
	env := []string{"PRACTICEGW_REDIS=" + redis.URL(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}
	return f, f.gateway(t, addrA, env...), f.gateway(t, "", env...)
}

// onEachBackend runs test on each backend the trust tests run on: the
// embedded bbolt store with one gateway, and Redis shared by two
// gateways. gs are the gateways, the first the one the vendors send the
// administrator back to.
func onEachBackend(t *testing.T, test func(t *testing.T, f *connectFirm, gs []*gateway)) {
	t.Run("bbolt", func(t *testing.T) {
		addr := freePort(t)
		f := startConnectFirm(t, addr)
		test(t, f, []*gateway{f.gateway(t, addr, "PRACTICEGW_SECRETS_KEY="+secretsKey())})
	})
	t.Run("redis", func(t *testing.T) {
		f, a, b := twoConnectGateways(t)
		test(t, f, []*gateway{a, b})
	})
}

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
	// A failing copy says why; any other says nothing.
	if why := r.Header.Get("Data-State-Reason"); (why == "") == (state == "failing") {
		return fmt.Errorf("Data-State %s with Data-State-Reason %q", state, why)
	}
	return nil
}

// TestARoleServesOnlyTheFirmsOrganisation is a firm whose block sets no
// role, on bbolt and on two gateways sharing Redis: before anything is
// connected, and
// while its first consent is awaited, its reads answer
// system_not_connected on both (never the demo records); once connected,
// a reconnect's pending consent and a denied one leave both serving the
// organisation's copy, failing; the consent given again serves it live.
func TestARoleServesOnlyTheFirmsOrganisation(t *testing.T) {
	onEachBackend(t, func(t *testing.T, f *connectFirm, both []*gateway) {
		// a sends the administrator's consents, b (a itself on bbolt)
		// takes the writes that follow.
		a, b := both[0], both[len(both)-1]
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
	})
}

// TestAReconnectToAnotherOrganisationIsChosen is a gateway on bbolt, and
// two on Redis, whose firm reconnects Xero with a consent that no longer reaches the
// organisation it had: the connection waits in choose_tenant with the one
// it reaches, never taking it by itself, and both serve the old copy,
// failing; once the administrator chooses it, both serve the new
// organisation's invoices alone, backfilled afresh. No read of either
// gateway ever lists invoices of both.
func TestAReconnectToAnotherOrganisationIsChosen(t *testing.T) {
	onEachBackend(t, func(t *testing.T, f *connectFirm, both []*gateway) {
		// a sends the administrator's consents, b (a itself on bbolt)
		// takes the writes that follow.
		a, b := both[0], both[len(both)-1]
		rec := &seen{}
		tok := a.issue("frm_hollis", false, "admin", "invoices:read").Token
		admin := newConsentBrowser(t)

		created := connectionOf(t, rec.keep(a.do(t, "POST", "/v1/connections", tok, map[string]any{"role": "ledger", "system": "xero"})))
		id := created["id"].(string)
		connectionOf(t, callback(t, a, rec, admin, consent(t, f.x, admin, created["authorize_url"].(string))))
		for _, g := range both {
			eventually.NoError(t, 30*time.Second, 20*time.Millisecond, "the first organisation's invoices", func() error {
				return servesCopy(t, g, tok, 30, "INV-", "live")
			})
		}

		// Every read of either gateway, until the end, is of one
		// organisation.
		stop, mixed := make(chan struct{}), make(chan string, 1)
		readersDone := make(chan struct{})
		go func() {
			defer close(readersDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, g := range both {
					r := g.do(t, "GET", "/v1/invoices?limit=100", tok, nil)
					body := string(r.body)
					if strings.Contains(body, `"number":"INV-`) && strings.Contains(body, `"number":"ORG2-`) {
						select {
						case mixed <- tail(body, 400):
						default:
						}
					}
				}
			}
		}()

		// The administrator who consents now belongs to another organisation
		// only.
		org2 := "0b0b0b0b-0000-4000-8000-000000000002"
		f.x.Identity.AddTenant(org2, "Second Practice Ltd")
		f.x.Identity.RemoveTenant(f.x.TenantID)
		for i := range 5 {
			f.x.AddInvoice(vendortest.XeroInvoice{InvoiceID: fmt.Sprintf("0b0b0b0b-0000-4000-8000-%012d", i), InvoiceNumber: fmt.Sprintf("ORG2-%04d", i),
				Status: "AUTHORISED", ContactID: "xc-org2", ContactName: "Org Two Client", Date: time.Now(), DueDate: time.Now(),
				Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: time.Now(), Tenant: org2})
		}
		again := connectionOf(t, rec.keep(b.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"reconnect": true})))
		waiting := connectionOf(t, callback(t, b, rec, admin, consent(t, f.x, admin, again["authorize_url"].(string))))
		choices, _ := waiting["choices"].([]any)
		if waiting["status"] != "choose_tenant" || len(choices) != 1 || choices[0].(map[string]any)["id"] != org2 ||
			waiting["tenant_id"] != f.x.TenantID || !strings.Contains(fmt.Sprint(waiting["reason"]), "Demo Company (UK)") {
			t.Fatalf("a reconnect reaching another organisation only: %v", waiting)
		}
		for _, g := range both {
			eventually.NoError(t, 2*time.Second, poll, "the old copy, failing, while the organisation is chosen", func() error {
				return servesCopy(t, g, tok, 30, "INV-", "failing")
			})
			if why := g.do(t, "GET", "/v1/invoices?limit=1", tok, nil).Header.Get("Data-State-Reason"); !strings.Contains(why, "the new consent does not reach Demo Company (UK)") {
				t.Errorf("the reason of reads while the organisation is chosen: %q", why)
			}
		}
		chosen := connectionOf(t, rec.keep(a.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"tenant_id": org2})))
		if chosen["status"] != "connected" || chosen["tenant_id"] != org2 || chosen["tenant_name"] != "Second Practice Ltd" {
			t.Fatalf("chosen: %v", chosen)
		}
		for _, g := range both {
			eventually.NoError(t, 30*time.Second, 20*time.Millisecond, "the new organisation's invoices alone, live", func() error {
				return servesCopy(t, g, tok, 5, "ORG2-", "live")
			})
		}
		close(stop)
		<-readersDone
		select {
		case body := <-mixed:
			t.Fatalf("a read listed invoices of both organisations: %s", body)
		default:
		}
		if reads := fullReads(f.x); len(reads) != 2 {
			t.Errorf("the invoices were read in full %d times, want once per organisation: %q", len(reads), reads)
		}
	})
}

// TestKarbonRefusingTheKeyPausesTheConnection is a gateway on bbolt, and
// two on Redis, whose firm connected Karbon: Karbon refusing the access key on every
// call turns the connection needs_reconnect with the reason in words on
// both, /readyz and the metric say so, writes answer 409
// connection_needs_reconnect and reads answer the copy, failing; a
// reconnect with a key Karbon takes resumes it on both within 2 s.
func TestKarbonRefusingTheKeyPausesTheConnection(t *testing.T) {
	onEachBackend(t, func(t *testing.T, f *connectFirm, both []*gateway) {
		// a sends the administrator's consents, b (a itself on bbolt)
		// takes the writes that follow.
		a, b := both[0], both[len(both)-1]
		rec := &seen{}
		tok := a.issue("frm_hollis", false, "admin", "clients:read", "clients:write").Token
		karbon := connectionOf(t, rec.keep(a.do(t, "POST", "/v1/connections", tok,
			map[string]any{"role": "records", "system": "karbon", "access_key": f.k.AccessKey})))
		id := karbon["id"].(string)
		for _, g := range both {
			// Karbon's 120 calls a minute make the backfill of 130 clients'
			// cards last a minute: it is under way.
			eventually.NoError(t, 30*time.Second, 20*time.Millisecond, "clients served from Karbon's sync", func() error {
				if r := g.do(t, "GET", "/v1/clients?limit=5", tok, nil); r.StatusCode != 200 || r.Header.Get("Data-State") == "" {
					return fmt.Errorf("%d %q %s", r.StatusCode, r.Header.Get("Data-State"), tail(string(r.body), 200))
				}
				return nil
			})
		}

		// Karbon refuses the key, on every call.
		f.k.Faults.Down(vendortest.Fault{Status: http.StatusUnauthorized, Body: `{"error":{"code":"401","message":"Unauthorized"}}`})
		for _, g := range both {
			eventually.NoError(t, 30*time.Second, 50*time.Millisecond, "the connection to need reconnecting", func() error {
				c := connectionOf(t, g.do(t, "GET", "/v1/connections/"+id, tok, nil))
				if c["status"] != "needs_reconnect" || !strings.Contains(fmt.Sprint(c["reason"]), "Karbon no longer accepts this connection's access key") {
					return fmt.Errorf("%v %v", c["status"], c["reason"])
				}
				if s := connectionStates(t, g)["karbon"]; s != "needs_reconnect" {
					return fmt.Errorf("/readyz says %q", s)
				}
				return nil
			})
			if m := metrics(t, g); !strings.Contains(m, `practicegw_connections{firm="frm_hollis",role="records",status="needs_reconnect",system="karbon"} 1`) {
				t.Errorf("the metric does not say needs_reconnect")
			}
			refusedWith(t, g.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Made Up Ltd", "type": "company"}),
				http.StatusConflict, "connection_needs_reconnect", "a client written while Karbon refuses the key")
			// practicegw sync status agrees: the records role is the
			// paused connection, the ledger connected to nothing.
			status, err := g.cli("sync", "status", "--firm", "frm_hollis")
			for _, want := range []string{"records    Karbon, connection " + id + " (needs reconnecting): its copy is served, failing",
				"ledger     not connected: /v1 refuses its reads until a system is connected"} {
				if err != nil || !strings.Contains(status, want) {
					t.Errorf("sync status lacks %q: %v\n%s", want, err, status)
				}
			}
			r := g.do(t, "GET", "/v1/clients?limit=5", tok, nil)
			if r.StatusCode != 200 || r.Header.Get("Data-State") != "failing" ||
				r.Header.Get("Data-State-Reason") != "Karbon no longer accepts this connection's access key; reconnect it with a new one." {
				t.Errorf("clients while Karbon refuses the key: %d %q (%q) %s", r.StatusCode, r.Header.Get("Data-State"),
					r.Header.Get("Data-State-Reason"), tail(string(r.body), 200))
			}
		}

		f.k.Faults.Up()
		back := connectionOf(t, rec.keep(b.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"reconnect": true, "access_key": f.k.AccessKey})))
		if back["status"] != "connected" || back["attempt"] != float64(2) {
			t.Fatalf("reconnected: %v", back)
		}
		for _, g := range both {
			eventually.NoError(t, 2*time.Second, poll, "Karbon opened again with the key", func() error {
				c := connectionOf(t, g.do(t, "GET", "/v1/connections/"+id, tok, nil))
				syncs, _ := c["sync"].([]any)
				if len(syncs) != 1 || syncs[0].(map[string]any)["state"] == "paused" {
					return fmt.Errorf("%v", c["sync"])
				}
				return nil
			})
		}
		// Writes reach Karbon again, with the key: within Karbon's 120 calls a
		// minute, which the resumed backfill spends too, so a write may wait
		// its turn.
		eventually.NoError(t, 15*time.Second, poll, "a client written to Karbon", func() error {
			r := b.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Reconnected Ltd", "type": "company"})
			if r.StatusCode != http.StatusCreated {
				return fmt.Errorf("%d %s", r.StatusCode, tail(string(r.body), 200))
			}
			return nil
		})
	})
}
