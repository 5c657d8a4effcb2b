package linking_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

var seed = flag.Int64("seed", -1, "replay one seed of TestLateLinksInterleaved")

// sink keeps the change records published, in order.
type sink struct {
	mu  sync.Mutex
	all []practice.Change
}

func (s *sink) Publish(_ context.Context, c practice.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, c)
	return nil
}

// instance is one gateway mapping a ledger's invoices: its own cache of
// the records system's clients (stale until it reads them again), its
// own Versions and Recorder over the state every instance shares.
type instance struct {
	dir      *linking.Directory
	versions *linking.Versions
	rec      *changes.Recorder
}

// vendorState is one state of a ledger invoice.
type vendorState struct {
	status  string
	updated time.Time
}

// TestLateLinksInterleaved drives, seed by seed, two instances mapping a
// ledger's invoices while the records system gains the clients they
// stand for, their caches of its clients refreshed at random, the ledger
// editing invoices and old states read late. Invariants: every change
// record of an invoice has a greater version than the one before it, a
// state the instance serves never goes back in version, and once the
// caches are current every invoice names its client with the ledger's
// latest state.
func TestLateLinksInterleaved(t *testing.T) {
	seeds := []int64{}
	if *seed >= 0 {
		seeds = append(seeds, *seed)
	} else {
		for i := range int64(300) {
			seeds = append(seeds, i)
		}
	}
	for _, s := range seeds {
		if err := lateLinks(s); err != nil {
			t.Fatalf("seed %d (replay with -args -seed=%d): %v", s, s, err)
		}
	}
}

func lateLinks(seed int64) error {
	rng := rand.New(rand.NewPCG(uint64(seed), 39))
	ctx := context.Background()
	tenant := practice.Tenant{Firm: "f"}
	clk := &clock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	state := changes.NewMemoryState()
	out := &sink{}
	const invoices, contacts = 6, 4
	var created []linking.Entry
	history := make([][]vendorState, invoices)
	for i := range history {
		history[i] = []vendorState{{status: "issued", updated: clk.now.Add(-time.Hour)}}
	}
	instances := make([]*instance, 2)
	for i := range instances {
		instances[i] = &instance{dir: linking.NewDirectory(nil),
			versions: &linking.Versions{State: state, Clock: clk, Prefix: "sim/"},
			rec:      &changes.Recorder{State: state, Clock: clk}}
	}
	contactOf := func(i int) string { return fmt.Sprintf("Client %d", i%contacts) }
	mapInvoice := func(in *instance, i int, st vendorState) error {
		inv := practice.Invoice{ID: fmt.Sprintf("inv_%d", i), Object: "invoice", Status: st.status,
			CreatedAt: history[i][0].updated, UpdatedAt: st.updated, Version: practice.VersionAt(st.updated)}
		inv.Client = in.dir.Match(linking.Candidate{Ref: contactOf(i), Name: contactOf(i)}).Ref()
		if err := in.versions.Settle(ctx, tenant, practice.Invoices, inv.ID, &inv.Version, &inv.UpdatedAt, &inv); err != nil {
			return err
		}
		raw, err := practice.Marshal(&inv)
		if err != nil {
			return err
		}
		_, err = in.rec.Observe(ctx, out, changes.Observation{Tenant: tenant, Kind: practice.Invoices, ResourceID: inv.ID,
			After: raw, Created: true})
		return err
	}
	for step := 0; step < 200; step++ {
		clk.now = clk.now.Add(time.Duration(1+rng.IntN(5000)) * time.Millisecond)
		in := instances[rng.IntN(len(instances))]
		switch r := rng.IntN(10); {
		case r == 0 && len(created) < contacts:
			n := len(created)
			created = append(created, linking.Entry{ID: fmt.Sprintf("cli_%d", n), Name: fmt.Sprintf("client  %d", n)})
		case r <= 2:
			in.dir = linking.NewDirectory(append([]linking.Entry(nil), created...))
		case r == 3:
			i := rng.IntN(invoices)
			status := "paid"
			if history[i][len(history[i])-1].status == "paid" {
				status = "issued"
			}
			history[i] = append(history[i], vendorState{status: status, updated: clk.now.Add(-time.Duration(rng.IntN(3000)) * time.Millisecond)})
			if last := history[i][len(history[i])-2]; !history[i][len(history[i])-1].updated.After(last.updated) {
				history[i][len(history[i])-1].updated = last.updated.Add(time.Millisecond)
			}
		case r == 4:
			i := rng.IntN(invoices)
			if err := mapInvoice(in, i, history[i][rng.IntN(len(history[i]))]); err != nil {
				return err
			}
		default:
			i := rng.IntN(invoices)
			if err := mapInvoice(in, i, history[i][len(history[i])-1]); err != nil {
				return err
			}
		}
	}
	for len(created) < contacts {
		n := len(created)
		created = append(created, linking.Entry{ID: fmt.Sprintf("cli_%d", n), Name: fmt.Sprintf("Client %d", n)})
	}
	for _, in := range instances {
		clk.now = clk.now.Add(time.Second)
		in.dir = linking.NewDirectory(created)
		for i := range invoices {
			if err := mapInvoice(in, i, history[i][len(history[i])-1]); err != nil {
				return err
			}
		}
	}
	last := map[string]int64{}
	for _, c := range out.all {
		var v struct{ Version int64 }
		if err := json.Unmarshal(c.After, &v); err != nil {
			return err
		}
		if v.Version <= last[c.ResourceID] {
			return fmt.Errorf("%s: change to version %d after %d: %s", c.ResourceID, v.Version, last[c.ResourceID], c.After)
		}
		last[c.ResourceID] = v.Version
	}
	for i := range invoices {
		raw, err := state.Last(ctx, changes.StateKey(tenant, practice.Invoices, fmt.Sprintf("inv_%d", i)))
		if err != nil {
			return err
		}
		var inv practice.Invoice
		if err := json.Unmarshal(raw, &inv); err != nil {
			return err
		}
		want := fmt.Sprintf("cli_%d", i%contacts)
		if practice.IDOf(inv.Client) != want || inv.Status != history[i][len(history[i])-1].status {
			return fmt.Errorf("inv_%d ends %s, want client %s status %s", i, raw, want, history[i][len(history[i])-1].status)
		}
	}
	return nil
}
