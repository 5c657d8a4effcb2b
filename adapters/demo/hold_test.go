package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/practice"
)

// loadedTenant is t's records, loaded.
func loadedTenant(tb testing.TB, r *Records, t practice.Tenant) *tenant {
	tb.Helper()
	var ts *tenant
	if err := r.read(t, func(l *tenant) { ts = l }); err != nil {
		tb.Fatal(err)
	}
	return ts
}

// seededTenants counts the firms' live and sandbox sets db keeps.
func seededTenants(tb testing.TB, db *bbolt.DB) int {
	tb.Helper()
	n := 0
	err := db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(demoBucket)).ForEachBucket(func(firm []byte) error {
			return tx.Bucket([]byte(demoBucket)).Bucket(firm).ForEachBucket(func([]byte) error { n++; return nil })
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestRecordsAreSeededAndLoadedWhenFirstUsed: a gateway with many firms
// keeps only the demo records someone reads.
func TestRecordsAreSeededAndLoadedWhenFirstUsed(t *testing.T) {
	db := openDB(t, t.TempDir())
	var firms []string
	for i := range 40 {
		firms = append(firms, fmt.Sprintf("frm_%02d", i))
	}
	r := openRecords(t, db, firms)
	if n, s := r.Loaded(), seededTenants(t, db); n != 0 || s != 0 {
		t.Fatalf("after Open: %d sets loaded, %d seeded; want none", n, s)
	}
	sandbox := practice.Tenant{Firm: "frm_07", Sandbox: true}
	if got := all(t, r, sandbox, practice.Clients, practice.Filter{}, 200); len(got) != seedClients {
		t.Fatalf("%d clients, want %d", len(got), seedClients)
	}
	if n, s := r.Loaded(), seededTenants(t, db); n != 1 || s != 1 {
		t.Fatalf("after reading one sandbox: %d sets loaded, %d seeded; want 1 and 1", n, s)
	}
	// A set loaded later, or again, is the seed: the same bytes.
	fresh := openRecords(t, openDB(t, t.TempDir()), []string{"frm_07"})
	if a, b := dump(t, r, sandbox), dump(t, fresh, sandbox); string(a) != string(b) {
		t.Error("a set seeded when first used differs from one seeded alone")
	}
}

// TestUnloadKeepsWhatWasWritten: a set dropped from memory comes back with
// every write made before, and writes after go on from it (invoice
// numbers, owners).
func TestUnloadKeepsWhatWasWritten(t *testing.T) {
	r, clock := openAcme(t)
	name := "Unloaded Ltd"
	created, err := r.CreateClient(ctx, acmeSandbox, practice.ClientInput{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Trigger(ctx, "frm_acme", "invoice.raised")
	if err != nil {
		t.Fatal(err)
	}
	var first, next practice.Invoice
	if err := json.Unmarshal(c.After, &first); err != nil {
		t.Fatal(err)
	}
	if n := r.Unload(clock.last()); n != 0 {
		t.Fatalf("Unload of sets used at the time given dropped %d", n)
	}
	if n := r.Unload(clock.last().Add(time.Millisecond)); n != 1 {
		t.Fatalf("Unload dropped %d sets, want the one sandbox used", n)
	}
	if r.Loaded() != 0 {
		t.Fatalf("%d sets still loaded", r.Loaded())
	}
	got, err := r.Get(ctx, acmeSandbox, practice.Clients, idOf(t, created))
	if err != nil || string(got) != string(created) {
		t.Fatalf("client written before the unload: %s, %v; want %s", got, err, created)
	}
	r.Unload(clock.last().Add(time.Millisecond))
	c, err = r.Trigger(ctx, "frm_acme", "invoice.raised")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(c.After, &next); err != nil {
		t.Fatal(err)
	}
	if minorNumber(practice.ValueOf(next.Number)) != minorNumber(practice.ValueOf(first.Number))+1 {
		t.Errorf("invoice after an unload numbered %s, after %s", practice.ValueOf(next.Number), practice.ValueOf(first.Number))
	}
}

// TestUnloadUnderReadsAndWrites runs writers, readers and unloads at once
// (seeded choices; run with -race): every read of a set sees every write
// acknowledged before it began, whichever unload came between.
func TestUnloadUnderReadsAndWrites(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r, clock := openAcme(t)
			var mu sync.Mutex
			acked := map[practice.Tenant][]string{}
			tenants := []practice.Tenant{acme, acmeSandbox, birch}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, uint64(w)))
					for i := range 40 {
						tn := tenants[rng.IntN(len(tenants))]
						switch rng.IntN(4) {
						case 0:
							name := fmt.Sprintf("Client %d-%d", w, i)
							raw, err := r.CreateClient(ctx, tn, practice.ClientInput{Name: &name})
							if err != nil {
								errs <- err
								return
							}
							mu.Lock()
							acked[tn] = append(acked[tn], idOf(t, raw))
							mu.Unlock()
						case 1:
							r.Unload(clock.last().Add(time.Hour))
						default:
							mu.Lock()
							ids := append([]string(nil), acked[tn]...)
							mu.Unlock()
							for _, id := range ids {
								if _, err := r.Get(ctx, tn, practice.Clients, id); err != nil {
									errs <- fmt.Errorf("%s client %s acknowledged before the read: %w", tn, id, err)
									return
								}
							}
							p, err := r.List(ctx, tn, practice.Clients, practice.Query{Limit: 1})
							if err != nil || len(p.Items) != 1 {
								errs <- fmt.Errorf("%s: a page of %d clients, %v", tn, len(p.Items), err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
