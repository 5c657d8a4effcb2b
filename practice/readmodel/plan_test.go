package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// callingVendor is a vendor whose listings cost several calls each, as
// Xero Practice Manager's do (jobs: current and a year of completed;
// invoices: current, draft and a year), and that cannot filter by
// modification time: every poll reads everything. Its records change
// while the sync reads them. It notes the time of every call.
type callingVendor struct {
	mu      sync.Mutex
	cost    map[practice.Kind]int
	records map[practice.Kind]int
	version int
	calls   []time.Time
}

func (v *callingVendor) List(_ context.Context, _ practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for range v.cost[k] {
		v.calls = append(v.calls, time.Now())
	}
	v.version++
	var items []json.RawMessage
	for i := range v.records[k] {
		items = append(items, json.RawMessage(fmt.Sprintf(`{"id":"%s_%d","updated_at":%q,"version":%d}`,
			k, i, time.Now().UTC().Format(time.RFC3339), v.version/50)))
	}
	return practice.Page{Items: items}, nil
}

func (v *callingVendor) Get(context.Context, practice.Tenant, practice.Kind, string) (json.RawMessage, error) {
	return nil, practice.ErrNotFound
}

func (v *callingVendor) sent() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return uint64(len(v.calls))
}

// xeroAllowances are Xero's published limits per organisation.
var xeroAllowances = []readmodel.Allowance{{Limit: 60, Per: time.Minute}, {Limit: 5000, Per: 24 * time.Hour}}

// firmOnXPM is a firm whose records and ledger are both Xero Practice
// Manager: two syncs on one Xero organisation, with the default
// configuration unless cfg and allowances say otherwise.
func firmOnXPM(v *callingVendor, cfg readmodel.SyncConfig, allowances []readmodel.Allowance) []*readmodel.Syncer {
	st := readmodelsim.NewStore(nil)
	model := readmodel.New(readmodel.Config{Firm: firm, Store: st})
	var syncs []*readmodel.Syncer
	for _, role := range []struct {
		name  string
		kinds []practice.Kind
	}{{"records", []practice.Kind{practice.Clients, practice.Jobs, practice.People}}, {"ledger", []practice.Kind{practice.Invoices}}} {
		for _, k := range role.kinds {
			model.Serve(k, v)
		}
		syncs = append(syncs, readmodel.NewSyncer(
			readmodel.SyncedSystem{Role: role.name, System: "xpm", Label: "XPM", Kinds: role.kinds, Reader: v},
			readmodel.SyncDeps{Model: model, Recorder: &changes.Recorder{State: model}, Sink: &sink{}, Checkpoints: st, Leases: st, Holder: "one"},
			cfg, readmodel.WithVendorCalls(v.sent, 0),
			readmodel.WithBudget(readmodel.SyncBudget{Allowances: allowances, Account: "xero:org"})))
	}
	readmodel.ShareBudgets(syncs)
	return syncs
}

// runFor runs syncs for d of the bubble's time and stops them.
func runFor(syncs []*readmodel.Syncer, d time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range syncs {
		wg.Go(func() { s.Run(ctx) })
	}
	time.Sleep(d)
	cancel()
	wg.Wait()
}

// perMinute is the most calls made in one clock minute, and the total.
func perMinute(calls []time.Time, start time.Time) (peak, total int) {
	minutes := map[int64]int{}
	for _, at := range calls {
		m := int64(at.Sub(start) / time.Minute)
		minutes[m]++
		peak = max(peak, minutes[m])
	}
	return peak, len(calls)
}

// A firm on Xero Practice Manager, at the default one-minute poll, spent
// about 7 calls a minute: over 10,000 a day against the 5,000 a day Xero
// gives the organisation. Planned by the day, the sync keeps at least half
// of the allowance free whatever the firm's listings cost.
func TestSyncKeepsHalfOfTheDailyAllowanceFree(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 23))
				v := &callingVendor{
					cost: map[practice.Kind]int{practice.Clients: 1, practice.Jobs: 2, practice.People: 1, practice.Invoices: 3},
					records: map[practice.Kind]int{practice.Clients: 1 + r.IntN(40), practice.Jobs: 1 + r.IntN(40),
						practice.People: 1 + r.IntN(5), practice.Invoices: 1 + r.IntN(40)},
				}
				if seed > 0 {
					// Listings that cost more than XPM's smallest.
					for k := range v.cost {
						v.cost[k] += r.IntN(6)
					}
				}
				syncs := firmOnXPM(v, readmodel.SyncConfig{}, xeroAllowances)
				start := time.Now()
				runFor(syncs, 24*time.Hour)
				peak, total := perMinute(v.calls, start)
				t.Logf("costs %v: %d calls in 24 h, peak %d in a minute", v.cost, total, peak)
				if total > 2500 {
					t.Errorf("the sync spent %d of Xero's 5,000 calls a day; it may spend at most half", total)
				}
				if peak > 60 {
					t.Errorf("%d calls in one minute, over Xero's 60", peak)
				}
				for _, s := range syncs {
					st := s.Status()
					if st.State != readmodel.StateLive {
						t.Errorf("%s: %s %s", s.Role(), st.State, st.Why)
					}
					p := st.Plan
					if p.Limit != 5000 || p.Period != 24*time.Hour || p.CallsPerPeriod > 1250 || p.CallsPerPeriod == 0 {
						t.Errorf("%s's plan: %+v", s.Role(), p)
					}
					if !strings.Contains(p.String(), "of 5,000 calls a day, at most 1,250 for this sync") {
						t.Errorf("%s's plan for people: %q", s.Role(), p)
					}
				}
			})
		})
	}
}

// Polls of cheap kinds keep the configured interval; only what the
// allowance cannot pay for is spaced out.
func TestConfiguredPollIsAFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := &callingVendor{
			cost:    map[practice.Kind]int{practice.Clients: 1, practice.Jobs: 1, practice.People: 1, practice.Invoices: 1},
			records: map[practice.Kind]int{practice.Clients: 3, practice.Jobs: 3, practice.People: 3, practice.Invoices: 3},
		}
		// A generous allowance: nothing to space out.
		syncs := firmOnXPM(v, readmodel.SyncConfig{Poll: 2 * time.Minute}, []readmodel.Allowance{{Limit: 1000, Per: time.Minute}})
		start := time.Now()
		runFor(syncs, time.Hour)
		_, total := perMinute(v.calls, start)
		// Four kinds, each once at the backfill and every 2 minutes.
		if total < 4*25 || total > 4*32 {
			t.Errorf("%d calls in an hour polling four one-call kinds every 2 minutes", total)
		}
		if got := syncs[0].Status().Plan.String(); got != "polls every 2m: about 2 of 1,000 calls a minute, at most 250 for this sync" {
			t.Errorf("plan: %q", got)
		}
	})
}
