package firms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// placed is an instance with a memory bound and the cluster that holds
// the firms the placement gives it, among the others on the same Redis.
type placed struct {
	*Runtime
	cluster *cluster.Cluster
}

func (w *world) placedInstance(replicas int) placed {
	a := w.instance(func(cfg *Config, _ *Deps) { cfg.Placed = true })
	p := placed{Runtime: a, cluster: cluster.New(cluster.Config{ID: a.cfg.Holder, Advertise: "http://" + a.cfg.Holder, Memory: 1 << 30,
		Replicas: replicas}, a.d.Store.(cluster.Membership), a, nil)}
	// Before the connections close (cleanups run last first).
	w.t.Cleanup(func() {
		for _, firm := range a.Held() {
			a.Release(firm)
		}
	})
	return p
}

// TestConnectionsFollowThePlacement: a firm's connected systems are held
// where the firm is, like a Caddyfile firm's: seeded interleavings of the
// instances' follow loops and placement rounds with connections made,
// refused and reconnected, disconnected and made again. Once every
// instance has looked, each firm with a connection is held by replicas
// instances; a connection's sync runs only on them, and its copy is in
// memory only there; the others answer its reads through the shared
// store, with what a holder answers.
func TestConnectionsFollowThePlacement(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 35))
			w := newWorld(t, "frm_demo", "frm_k", "frm_x")
			const replicas = 1
			apps := []placed{w.placedInstance(replicas), w.placedInstance(replicas), w.placedInstance(replicas)}
			// Each instance's own heartbeat every second, which the test
			// stands for before a placement round: none lapses while it
			// waits for the vendors' doubles.
			heartbeats := func() {
				for _, a := range apps {
					a.cluster.Heartbeat(ctx)
				}
			}
			place := func(a placed) {
				heartbeats()
				a.cluster.Place(ctx)
			}
			conns := map[string]connection.Connection{"frm_k": w.connectKarbon("frm_k"), "frm_x": w.connectXero("frm_x")}
			for range 24 {
				a := apps[rng.IntN(len(apps))]
				switch op := rng.IntN(6); {
				case op < 2:
					step(t, a.Runtime)
				case op < 4:
					place(a)
				case op == 4:
					firm := []string{"frm_k", "frm_x"}[rng.IntN(2)]
					w.conns.change(t, conns[firm].ID, func(c *connection.Connection) {
						if c.Status == connection.Connected {
							c.Status = connection.NeedsReconnect
						} else {
							c.Status = connection.Connected
						}
					})
				default:
					// The Karbon connection disconnected and made again.
					w.conns.change(t, conns["frm_k"].ID, func(c *connection.Connection) { c.Status = connection.Disconnected })
					if rng.IntN(2) == 0 {
						step(t, apps[rng.IntN(len(apps))].Runtime)
					}
					conns["frm_k"] = w.connectKarbon("frm_k")
				}
			}
			for _, firm := range []string{"frm_k", "frm_x"} {
				w.conns.change(t, conns[firm].ID, func(c *connection.Connection) { c.Status = connection.Connected })
			}
			// Every instance looks, holds what is placed on it, and lets
			// go once the new holders hold.
			for range 2 {
				for _, a := range apps {
					step(t, a.Runtime)
				}
				for _, a := range apps {
					place(a)
				}
			}
			for _, a := range apps {
				step(t, a.Runtime)
			}
			checkPlacedConnections(t, apps, []string{"frm_k", "frm_x"}, replicas)

			// Every instance answers the connections' reads as the store
			// has them, once the holder's sync has copied them.
			for firm, kind := range map[string]practice.Kind{"frm_k": practice.Clients, "frm_x": practice.Invoices} {
				want := 0
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					if want = w.stored(firm, []practice.Kind{kind}); want > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: no %s copied within 20 s", firm, kind)
					}
				}
				for i, a := range apps {
					p, err := read(a.Runtime, firm, kind).List(ctx, practice.Tenant{Firm: firm}, kind, practice.Query{Limit: 500})
					if err != nil {
						t.Fatalf("instance %d: %s %s: %v", i, firm, kind, err)
					}
					if got := len(p.Items); got < want {
						t.Errorf("instance %d (holds %t): %d %s of %s, the store has %d", i, a.Holds(firm), got, kind, firm, want)
					}
				}
			}
			// A read no holder took loaded the copy; the next round lets
			// it go again.
			for _, a := range apps {
				place(a)
			}
			checkPlacedConnections(t, apps, []string{"frm_k", "frm_x"}, replicas)
		})
	}
}

// checkPlacedConnections checks that each firm is held replicas times,
// its connections synced and in memory where it is held and nowhere else,
// and read through the shared store elsewhere.
func checkPlacedConnections(t *testing.T, apps []placed, firms []string, replicas int) {
	t.Helper()
	for _, firm := range firms {
		holders := 0
		for i, a := range apps {
			held := a.Holds(firm)
			if held {
				holders++
			}
			a.follow.mu.Lock()
			cs := a.firms[firm].connections()
			a.follow.mu.Unlock()
			if len(cs) == 0 {
				t.Fatalf("instance %d: %s has no connection open", i, firm)
			}
			for _, c := range cs {
				if c.running() != held {
					t.Errorf("instance %d (holds %s: %t): %s's sync running %t", i, firm, held, c.conn.ID, c.running())
				}
				if c.model.Loaded() != held {
					t.Errorf("instance %d (holds %s: %t): %s's copy in memory %t", i, firm, held, c.conn.ID, c.model.Loaded())
				}
				kind := firmsystem.Kinds(c.conn.Role)[0]
				_, served := read(a.Runtime, firm, kind).(storeServed)
				if served == held {
					t.Errorf("instance %d (holds %s: %t): %s read from %T", i, firm, held, kind, read(a.Runtime, firm, kind))
				}
			}
		}
		if holders != replicas {
			for i, a := range apps {
				t.Logf("instance %d (%s): placed %v, held by %v", i, a.cfg.Holder, a.cluster.Placement().Holders[firm], a.cluster.Holders(firm))
			}
			t.Errorf("%s held by %d instances, want %d", firm, holders, replicas)
		}
	}
}
