package connect_test

import (
	"flag"
	"math/rand/v2"
	"net/url"
	"runtime"
	"sync"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

var seeds = flag.Int("connect.seeds", 200, "schedules TestStepsOfOneConnectionUnderManyInterleavings runs")

// Two instances finish, reconnect, choose and disconnect one connection at
// once, each step's store calls yielding to the others as a seeded
// scheduler decides. Whatever the order: every answer is a contract error
// or a success; a disconnect that succeeded is final, with no token left
// and the copy purged; a connection that says connected or waits for a
// choice has its token where the sync reads it; no code is exchanged
// twice.
func TestStepsOfOneConnectionUnderManyInterleavings(t *testing.T) {
	for seed := range *seeds {
		h := newHarness(t)
		rng := rand.New(rand.NewPCG(uint64(seed), 26))
		var rngMu sync.Mutex
		draw := func(n int) int {
			rngMu.Lock()
			defer rngMu.Unlock()
			return rng.IntN(n)
		}
		if draw(2) == 1 {
			h.v.tenants = append(h.v.tenants, map[string]string{"id": "c2", "tenantId": "org-2", "tenantName": "Second"})
		}
		ms := []*connect.Manager{h.m, h.manager()}
		v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
		first := h.allow(v.AuthorizeURL)
		h.store.yield = func() {
			for range draw(3) {
				runtime.Gosched()
			}
		}
		callback := func(m *connect.Manager, q url.Values) error { _, err := m.Callback(ctx, q, adminBrowser); return err }
		steps := []func(m *connect.Manager) (string, error){
			func(m *connect.Manager) (string, error) { return "callback", callback(m, first) },
			func(m *connect.Manager) (string, error) { return "replayed callback", callback(m, first) },
			func(m *connect.Manager) (string, error) {
				r, err := m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true})
				if err != nil {
					return "reconnect", err
				}
				// The link opened on either instance, the callback landing on
				// either: the connection may have moved on meanwhile.
				page, err := h.open(ms[draw(2)], r.AuthorizeURL)
				if err != nil {
					return "reconnect's start", err
				}
				return "reconnect's callback", callback(ms[draw(2)], h.v.consent(page))
			},
			func(m *connect.Manager) (string, error) {
				_, err := m.Update(ctx, "frm_a", v.ID, connection.Request{TenantID: "org-2"})
				return "choose", err
			},
			func(m *connect.Manager) (string, error) {
				_, err := m.Disconnect(ctx, "frm_a", v.ID)
				return "disconnect", err
			},
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		disconnected := false
		for _, i := range rng.Perm(len(steps)) {
			if draw(4) == 0 {
				continue // this schedule leaves the step out
			}
			m := ms[draw(2)]
			wg.Go(func() {
				name, err := steps[i](m)
				if err == nil && name == "disconnect" {
					mu.Lock()
					disconnected = true
					mu.Unlock()
				}
				if _, known := apierror.From(err); err != nil && !known {
					t.Errorf("seed %d: %s: %v is no contract error", seed, name, err)
				}
			})
		}
		wg.Wait()
		h.store.yield = nil

		c := h.stored(v.ID)
		tok := h.token(c, oauthtoken.Xero, "xero")
		switch {
		case disconnected && c.Status != connection.Disconnected:
			t.Fatalf("seed %d: disconnected, then %+v", seed, c)
		case c.Status == connection.Disconnected && (tok != nil || len(h.rt.purges()) != 1):
			t.Fatalf("seed %d: disconnected with token %v, purges %v", seed, tok, h.rt.purges())
		case (c.Status == connection.Connected || c.Status == connection.ChooseTenant) && tok == nil:
			t.Fatalf("seed %d: %s without a token", seed, c.Status)
		case c.Status == connection.Connected && c.TenantID == "":
			t.Fatalf("seed %d: connected to no organisation: %+v", seed, c)
		}
		h.v.mu.Lock()
		consents, exchanges := h.v.seq, h.v.exchanges
		h.v.mu.Unlock()
		if exchanges > consents {
			t.Fatalf("seed %d: %d exchanges for %d consents", seed, exchanges, consents)
		}
	}
}
