package connect_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/connection"
)

var seeds = flag.Int("connect.seeds", 200, "schedules TestStepsOfOneConnectionUnderManyInterleavings runs")

// Two instances finish, reconnect, choose and disconnect one connection at
// once, while the firm moves the app to another organisation, and
// reconnect, check hourly and disconnect a Karbon connection whose key
// Karbon may revoke or glitch on, each step's store calls yielding to the
// others as a seeded scheduler decides. Whatever the order: every answer
// is a contract error or a success; a disconnect that succeeded is final,
// with no token left and the copy purged, nothing written into it after
// the purge by a sync that has not seen the disconnect; a connection that
// says connected or waits for a choice has its token where the sync reads it;
// no code is exchanged twice; a connection reaches another organisation
// only by the administrator's choice, after the old one's copy was
// purged; Karbon's connection needs reconnecting only when Karbon
// refuses its key, each new key is a new attempt, and a disconnected one
// keeps no key.
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
		h.rt.copy = copyOf(t)
		v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
		first := h.allow(v.AuthorizeURL)
		kv := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
		karbonKey := func() string {
			h.v.mu.Lock()
			defer h.v.mu.Unlock()
			return h.v.karbonKey
		}
		var revoked, triedKarbon, reconnectedKarbon atomic.Int32
		if draw(2) == 0 {
			// The first consent is finished before the rest: what
			// follows moves a connected connection.
			if _, err := h.m.Callback(ctx, first, adminBrowser); err != nil {
				t.Fatal(err)
			}
		}
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
				_, err := m.Update(ctx, "frm_a", v.ID, connection.Request{OrganisationID: "org-2"})
				return "choose", err
			},
			func(m *connect.Manager) (string, error) {
				_, err := m.Disconnect(ctx, "frm_a", v.ID)
				return "disconnect", err
			},
			func(*connect.Manager) (string, error) {
				// The firm gives the app another organisation in place
				// of the first: a later consent reaches that one alone.
				h.v.mu.Lock()
				h.v.tenants = []map[string]string{{"id": "c2", "tenantId": "org-2", "tenantName": "Second"}}
				h.v.mu.Unlock()
				return "organisation moved", nil
			},
			func(m *connect.Manager) (string, error) {
				key := "kb-" + randomKey(draw)
				h.v.mu.Lock()
				h.v.karbonKey = key
				h.v.mu.Unlock()
				revoked.Add(1)
				triedKarbon.Add(1)
				_, err := m.Update(ctx, "frm_a", kv.ID, connection.Request{Reconnect: true, AccessKey: key})
				if err == nil {
					reconnectedKarbon.Add(1)
				}
				return "karbon reconnect", err
			},
			func(*connect.Manager) (string, error) {
				h.v.mu.Lock()
				h.v.karbonKey = "kb-" + randomKey(draw)
				h.v.mu.Unlock()
				revoked.Add(1)
				return "karbon key revoked", nil
			},
			func(*connect.Manager) (string, error) {
				h.v.mu.Lock()
				h.v.karbonGlitches++
				h.v.mu.Unlock()
				return "karbon glitch", nil
			},
			func(m *connect.Manager) (string, error) { return "karbon hourly check", m.CheckSubscriptions(ctx) },
			func(m *connect.Manager) (string, error) {
				_, err := m.Disconnect(ctx, "frm_a", kv.ID)
				return "karbon disconnect", err
			},
		}
		// Two instances' syncs of the ledger: each looks at the
		// connection, may miss whatever follows (every other step: a
		// whole reconnect to another organisation), and writes what it
		// read of the organisation it saw, fenced by the attempt it saw.
		var others sync.WaitGroup
		connectionSteps := len(steps)
		for n := range 2 {
			steps = append(steps, func(*connect.Manager) (string, error) {
				seen := h.stored(v.ID)
				if seen.Status != connection.Connected {
					return "sync", nil
				}
				if draw(2) == 0 {
					others.Wait()
				}
				for range draw(40) {
					runtime.Gosched()
				}
				return "sync", syncWrite(h.rt.copy, seen, n)
			})
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		disconnected := false
		var run []int
		for _, i := range rng.Perm(len(steps)) {
			if draw(4) == 0 {
				continue // this schedule leaves the step out
			}
			if run = append(run, i); i < connectionSteps {
				others.Add(1)
			}
		}
		for _, i := range run {
			m := ms[draw(2)]
			wg.Go(func() {
				if i < connectionSteps {
					defer others.Done()
				}
				name, err := steps[i](m)
				if err == nil && name == "disconnect" {
					mu.Lock()
					disconnected = true
					mu.Unlock()
				}
				if _, known := apierror.From(err); err != nil && !known && name != "karbon hourly check" {
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
		case c.Status == connection.Disconnected && (tok != nil || countOf(h.rt.purges(), v.ID) != 1):
			t.Fatalf("seed %d: disconnected with token %v, purges %v", seed, tok, h.rt.purges())
		case (c.Status == connection.Connected || c.Status == connection.ChooseOrganisation) && tok == nil:
			t.Fatalf("seed %d: %s without a token", seed, c.Status)
		case c.Status == connection.Connected && c.OrganisationID == "":
			t.Fatalf("seed %d: connected to no organisation: %+v", seed, c)
		}
		h.v.mu.Lock()
		consents, exchanges := h.v.seq, h.v.exchanges
		h.v.mu.Unlock()
		if exchanges > consents {
			t.Fatalf("seed %d: %d exchanges for %d consents", seed, exchanges, consents)
		}
		if err := anotherOrganisationChosen(h.store.history.all(), v.ID); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if orgs := copiedOrganisations(t, h.rt.copy); c.Status == connection.Disconnected && len(orgs) > 0 {
			// After a disconnect's purge no sync of the connection,
			// whatever attempt it saw, writes into the copy.
			t.Fatalf("seed %d: the copy holds records of %v after the connection's disconnect", seed, orgs)
		} else if len(orgs) > 1 ||
			len(orgs) == 1 && c.Status == connection.Connected && !orgs[c.OrganisationID] {
			t.Fatalf("seed %d: the copy holds records of %v while the connection is %s to %q", seed, orgs, c.Status, c.OrganisationID)
		}

		k := h.stored(kv.ID)
		stored := h.secretOf(kv.ID, "access_key")
		switch {
		case k.Status == connection.NeedsReconnect && (revoked.Load() == 0 || stored == karbonKey()):
			t.Fatalf("seed %d: Karbon's connection needs reconnecting with a key Karbon takes (%d revocations)", seed, revoked.Load())
		case k.Status == connection.Disconnected && stored != "":
			t.Fatalf("seed %d: a disconnected Karbon connection keeps its key", seed)
		case k.Status != connection.Disconnected && (k.Attempt < 1+int(reconnectedKarbon.Load()) || k.Attempt > 1+int(triedKarbon.Load())):
			// A key Karbon took is a new attempt even when its
			// subscriptions could not all be made.
			t.Fatalf("seed %d: Karbon's attempt %d after %d reconnects of %d", seed, k.Attempt, reconnectedKarbon.Load(), triedKarbon.Load())
		}
	}
}

// anotherOrganisationChosen checks the writes of connection id in
// history: it moves from one organisation to another only from
// choose_tenant, the administrator's choice, and only after the old
// organisation's copy was purged.
func anotherOrganisationChosen(history []string, id string) error {
	reached, previous := "", ""
	purged := map[string]bool{}
	for _, line := range history {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "purge" && f[1] == id:
			purged[f[2]] = true
		case len(f) >= 2 && f[0] == id:
			status, org := f[1], ""
			if len(f) == 3 {
				org = f[2]
			}
			if status == string(connection.Connected) {
				if reached != "" && org != reached && (previous != string(connection.ChooseOrganisation) || !purged[reached]) {
					return fmt.Errorf("connected to %s after %s from %s, purged %v: %q", org, reached, previous, purged, history)
				}
				reached = org
				purged = map[string]bool{}
			}
			previous = status
		}
	}
	return nil
}

// randomKey is a Karbon access key drawn from the schedule.
func randomKey(draw func(int) int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 16)
	for i := range b {
		b[i] = alphabet[draw(len(alphabet))]
	}
	return string(b)
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// copyOf is an empty copy in a real (embedded) store.
func copyOf(t *testing.T) copyStore {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	secrets, _ := sealed.Random()
	st, err := boltstore.New(db, time.Now, boltstore.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	return st.ReadModel()
}

// syncWrite is an instance's sync writing an invoice of the organisation
// it saw connection c reach, fenced by the attempt it saw: refused (no
// error) once another organisation was chosen or c disconnected since.
func syncWrite(copy copyStore, c connection.Connection, n int) error {
	id := fmt.Sprintf("inv_%s-%d", c.OrganisationID, n)
	raw, _ := json.Marshal(map[string]string{"id": id, "organisation": c.OrganisationID})
	fence := readmodel.Fence{Firm: c.Firm, Name: c.ID, Generation: int64(c.Attempt)}
	_, _, err := copy.ApplyFenced(ctx, fence, nil, []readmodel.Update{{Kind: practice.Invoices, ID: id, Raw: raw}})
	if errors.Is(err, readmodel.ErrFenced) {
		return nil
	}
	return err
}

// copiedOrganisations are the organisations whose invoices the copy holds.
func copiedOrganisations(t *testing.T, copy copyStore) map[string]bool {
	t.Helper()
	orgs := map[string]bool{}
	err := copy.Load(ctx, "frm_a", func(u readmodel.Update) error {
		var rec struct{ Organisation string }
		if err := json.Unmarshal(u.Raw, &rec); err != nil {
			return err
		}
		orgs[rec.Organisation] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return orgs
}
