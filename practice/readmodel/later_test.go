package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/testclock"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// linkedLedger is a ledger whose invoices name the firm's client through
// another system, the records system, whose allowance its own sync
// spends: spent says, ask by ask, whether it has room at that moment.
// A read that may leave links for later (practice.LinksLater) is told
// no at once when it has none; any other waits its turn (waits counts
// it) and is answered. An invoice's version moves when its link does,
// as the gateway's stamps move it.
type linkedLedger struct {
	clock *testclock.Clock
	spent func() bool

	mu       sync.Mutex
	invoices []string // ids, in order; the customer of inv_N is cli_N
	// made is when each invoice was last changed at the vendor.
	made  map[string]time.Time
	waits int
	// firstReadWaited counts the asks of a first read that waited.
	firstReadWaited int
}

func (l *linkedLedger) add(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := fmt.Sprintf("inv_%03d", len(l.invoices))
	if l.made == nil {
		l.made = map[string]time.Time{}
	}
	l.invoices, l.made[id] = append(l.invoices, id), at
}

// link is the client of the customer of invoice id, nil when it is left
// for later.
func (l *linkedLedger) link(ctx context.Context, id string) *string {
	client := "cli_" + id[len("inv_"):]
	if !l.spent() {
		return &client
	}
	if later := practice.LaterOf(ctx); later != nil {
		later.Leave()
		return nil
	}
	l.mu.Lock()
	l.waits++
	l.mu.Unlock()
	l.clock.Advance(time.Second) // its turn comes
	return &client
}

func (l *linkedLedger) record(ctx context.Context, id string, made time.Time) json.RawMessage {
	client := l.link(ctx, id)
	version := made.UnixMilli()
	if client != nil {
		version++
	}
	raw, _ := json.Marshal(map[string]any{"id": id, "object": "invoice", "client": client, "version": version,
		"updated_at": time.UnixMilli(version).UTC().Format(time.RFC3339Nano)})
	return raw
}

// List pages the invoices changed since the filter's time three at a
// time, as a vendor filters by modification time: a link left for later
// changes nothing at the vendor.
func (l *linkedLedger) List(ctx context.Context, _ practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if k != practice.Invoices {
		return practice.Page{}, nil
	}
	from := 0
	if q.Cursor != "" {
		from, _ = strconv.Atoi(q.Cursor)
	}
	l.mu.Lock()
	var ids []string
	made := map[string]time.Time{}
	for _, id := range l.invoices {
		if !l.made[id].Before(q.Filter.UpdatedSince) {
			ids, made[id] = append(ids, id), l.made[id]
		}
	}
	l.mu.Unlock()
	from = min(from, len(ids))
	to := min(from+3, len(ids))
	var p practice.Page
	for _, id := range ids[from:to] {
		p.Items = append(p.Items, l.record(ctx, id, made[id]))
	}
	if to < len(ids) {
		p.HasMore, p.Next = true, strconv.Itoa(to)
	}
	return p, nil
}

func (l *linkedLedger) Get(ctx context.Context, _ practice.Tenant, _ practice.Kind, id string) (json.RawMessage, error) {
	l.mu.Lock()
	made, ok := l.made[id]
	l.mu.Unlock()
	if !ok {
		return nil, practice.ErrNotFound
	}
	return l.record(ctx, id, made), nil
}

// A ledger's backfill does not wait for the records system whose
// allowance its own sync spends: over seeded interleavings of that
// allowance's room and of invoices made meanwhile, the backfill ends
// within a tick per page, every invoice served, never waiting on a link;
// the links it left for later are made by the reconciliation that
// follows at once, waiting its turn; and no invoice linked is ever
// unlinked.
func TestABackfillLeavesLinksForLaterRatherThanWait(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clock := testclock.New(epoch)
		// The records system's sync spends its allowance for a while,
		// then leaves room now and then.
		busy := 1 + rng.IntN(4)
		ledger := &linkedLedger{clock: clock}
		ledger.spent = func() bool { return busy > 0 || rng.IntN(3) == 0 }
		for range 4 + rng.IntN(12) {
			ledger.add(epoch.Add(-time.Hour))
		}
		store := readmodelsim.NewStore(clock.Now)
		m := readmodel.New(readmodel.Config{Firm: firm, Store: store, Updates: store})
		m.Serve(practice.Invoices, ledger)
		out := &sink{}
		s := readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", System: "xero", Kinds: []practice.Kind{practice.Invoices}, Reader: ledger},
			readmodel.SyncDeps{Model: m, Recorder: &changes.Recorder{State: m, Clock: clock}, Sink: out,
				Checkpoints: store, Leases: store, Holder: "one"},
			readmodel.SyncConfig{Poll: time.Minute, Reconcile: 24 * time.Hour, LeaseTTL: 30 * time.Second},
			readmodel.WithClock(clock.Now))
		ctx := context.Background()

		pages := (len(ledger.invoices) + 2) / 3
		for tick := 0; ; tick++ {
			if tick > pages {
				t.Fatalf("seed %d: %d invoices of %d served after %d ticks of %d pages", seed, m.Count(practice.Invoices),
					len(ledger.invoices), tick, pages)
			}
			if f, _ := m.Freshness(practice.Invoices); f.Backfilled {
				break
			}
			s.Tick(ctx)
			busy--
		}
		if got, want := m.Count(practice.Invoices), len(ledger.invoices); got != want || ledger.waits != 0 {
			t.Fatalf("seed %d: the backfill served %d of %d invoices and waited %d times for a link", seed, got, want, ledger.waits)
		}
		// Invoices made after the backfill, and the records system's
		// room coming and going: within a few ticks every invoice names
		// its client.
		for range rng.IntN(3) {
			ledger.add(clock.Now())
		}
		for tick := 0; !allLinked(t, m, ledger); tick++ {
			if tick > 2 {
				t.Fatalf("seed %d: invoices still unlinked %d ticks after the backfill", seed, tick)
			}
			s.Tick(ctx)
			// Less than a poll's interval: the reconciliation links them,
			// not a poll that comes a minute later.
			clock.Advance(time.Duration(rng.IntN(10)) * time.Second)
		}
		// A link, once made, is never taken back.
		for _, c := range out.changes {
			var v struct{ Client *string }
			var before struct{ Client *string }
			_ = json.Unmarshal(c.After, &v)
			_ = json.Unmarshal(c.Before, &before)
			if before.Client != nil && v.Client == nil {
				t.Fatalf("seed %d: %s was unlinked: %s -> %s", seed, c.ResourceID, c.Before, c.After)
			}
		}
	}
}

// allLinked reports whether m serves every invoice of the ledger with
// its client.
func allLinked(t *testing.T, m *readmodel.Model, l *linkedLedger) bool {
	t.Helper()
	l.mu.Lock()
	ids := slices.Clone(l.invoices)
	l.mu.Unlock()
	for _, id := range ids {
		raw, err := m.Get(context.Background(), live, practice.Invoices, id)
		if err != nil {
			return false
		}
		var v struct{ Client *string }
		if json.Unmarshal(raw, &v) != nil || v.Client == nil || *v.Client != "cli_"+id[len("inv_"):] {
			return false
		}
	}
	return true
}
