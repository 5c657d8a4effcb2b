package quickbooks_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/quickbooks"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/testclock"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

type discard struct{}

func (discard) Publish(context.Context, practice.Change) error { return nil }

// ledgerSync is a QuickBooks ledger keeping the firm's engagements as the
// gateway syncs it: its adapter, the model and its one sync, on clock.
func ledgerSync(t *testing.T, q *vendortest.QuickBooks, clock *testclock.Clock) (*quickbooks.Adapter, *readmodel.Model, *readmodel.Syncer) {
	t.Helper()
	store := readmodelsim.NewStore(clock.Now)
	model := readmodel.New(readmodel.Config{Firm: live.Firm, Store: store})
	t.Cleanup(model.Close)
	rec := &changes.Recorder{State: model}
	a, err := quickbooks.New(quickbooks.Config{Firm: live.Firm, RealmID: q.RealmID, BaseURL: q.URL, VerifierToken: q.VerifierToken,
		OAuth2: upstream.OAuth2Config{AccessToken: q.Token}}, upstream.Deps{State: model, Recorder: rec, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []practice.Kind{practice.Invoices, practice.Engagements}
	for _, k := range kinds {
		model.Serve(k, a)
	}
	sync := readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", System: "quickbooks", Label: "QuickBooks", Kinds: kinds, Reader: a},
		readmodel.SyncDeps{Model: model, Recorder: rec, Sink: discard{}, Checkpoints: store, Leases: store, Holder: "one"},
		readmodel.SyncConfig{Poll: time.Hour, Reconcile: 24 * time.Hour, LeaseTTL: 30 * time.Second}, readmodel.WithClock(clock.Now))
	return a, model, sync
}

// A deletion QuickBooks confirmed is final: the engagement of a deleted
// estimate answers ended for good, and QuickBooks is not asked of it
// again. The daily reconciliation, whose listing never holds a deleted
// estimate, would otherwise read each one every day: its calls would grow
// with the deletions for ever. Both ways a deletion is confirmed are
// final: change data capture's status "Deleted", read by the sync's
// polls, and a not found (a reconciliation's or a webhook's read).
func TestADeletedEstimateIsNotAskedAgain(t *testing.T) {
	q := vendortest.StartQuickBooks(t)
	clock := vendortest.NewClock(epoch.Add(time.Hour))
	q.SetNow(clock.Now)
	for i := 1; i <= 20; i++ {
		q.AddEstimate(vendortest.QBEstimate{ID: fmt.Sprint(i), DocNumber: fmt.Sprintf("E%03d", i), CustomerID: "7", CustomerName: "Birch",
			TxnDate: epoch, Lines: []string{"Payroll"}, Total: "300.00", Status: "Pending", Updated: epoch})
	}
	ctx := context.Background()
	a, model, sync := ledgerSync(t, q, clock)
	// day runs the sync through a day of the clock, an hour at a time,
	// and returns the reads of single estimates QuickBooks answered and
	// every call.
	day := func() (reads, calls int) {
		t.Helper()
		before := len(q.Requests())
		for range 24 {
			clock.Advance(time.Hour)
			for range 100 {
				if _, more := sync.Tick(ctx); !more {
					break
				}
			}
		}
		for _, r := range q.Requests()[before:] {
			if strings.Contains(r, "/estimate/") {
				reads++
			}
		}
		return reads, len(q.Requests()) - before
	}
	ended := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			raw, err := model.Get(ctx, live, practice.Engagements, "eng_qb-"+id)
			if err != nil || decodeEngagement(t, raw).Status != "ended" {
				t.Fatalf("deleted estimate %s: %s %v, want its engagement ended", id, raw, err)
			}
		}
	}
	if reads, calls := day(); reads != 0 || model.Count(practice.Engagements) != 20 {
		t.Fatalf("the backfill's day: %d engagements, %d reads of an estimate, %d calls", model.Count(practice.Engagements), reads, calls)
	}
	_, idle := day()

	// Deleted in QuickBooks: the polls' change data capture says so, or
	// a reconciliation that comes first asks each once.
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		q.DeleteEstimate(id, clock.Now())
	}
	var days []int
	for d := range 4 {
		reads, calls := day()
		days = append(days, calls)
		if d == 0 && reads > 5 || d > 0 && reads != 0 {
			t.Fatalf("day %d after 5 deletions: %d reads of single estimates (calls a day: %d idle before them, %v since), want each deleted one read at most once, the first day", d+1, reads, idle, days)
		}
		ended("1", "2", "3", "4", "5")
	}
	t.Logf("calls a day: %d before the deletions, %v after", idle, days)

	// A deletion confirmed by QuickBooks' not found (a webhook's read, or
	// a reconciliation's when change data capture's look-back was
	// missed) is as final.
	q.DeleteEstimate("6", clock.Now())
	before := len(q.Requests())
	for range 3 {
		raw, err := a.Get(ctx, live, practice.Engagements, "eng_qb-6")
		if err != nil || decodeEngagement(t, raw).Status != "ended" {
			t.Fatalf("estimate 6 read after its deletion: %s %v", raw, err)
		}
	}
	if reqs := q.Requests()[before:]; len(reqs) != 1 {
		t.Fatalf("three reads of a deleted estimate asked QuickBooks %q, want it asked once", reqs)
	}
	// An estimate never seen is still not found, each time asked.
	if _, err := a.Get(ctx, live, practice.Engagements, "eng_qb-999"); err == nil {
		t.Fatal("an estimate never seen was found")
	}
	for d := range 2 {
		if reads, calls := day(); reads != 0 {
			t.Fatalf("day %d after 6 deletions: %d reads of single estimates (%d calls), want none", d+1, reads, calls)
		}
		ended("1", "2", "3", "4", "5", "6")
	}
}

// Deletions, edits, acceptances, polls, reconciliations and webhook reads
// interleaved in seeded orders: after each schedule every deleted
// estimate the copy held answers ended (one deleted before it was ever
// seen is not there), every other one as QuickBooks has it, and QuickBooks was asked of a deleted estimate at most once
// after its deletion. A failing seed replays from its number.
func TestDeletedEstimatesInterleaved(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 33))
			q := vendortest.StartQuickBooks(t)
			clock := vendortest.NewClock(epoch.Add(time.Hour))
			q.SetNow(clock.Now)
			ctx := context.Background()
			status := map[string]string{}
			next := 1
			add := func() {
				id := fmt.Sprint(next)
				next++
				q.AddEstimate(vendortest.QBEstimate{ID: id, DocNumber: "E" + id, CustomerID: "7", CustomerName: "Birch",
					TxnDate: epoch, Lines: []string{"Payroll"}, Total: "300.00", Status: "Pending", Updated: clock.Now()})
				status[id] = "sent"
			}
			for range 6 {
				add()
			}
			a, model, sync := ledgerSync(t, q, clock)
			held := map[string]bool{} // estimates the copy has held
			run := func() {
				for range 100 {
					if _, more := sync.Tick(ctx); !more {
						break
					}
				}
				for id := range status {
					if _, err := model.Get(ctx, live, practice.Engagements, "eng_qb-"+id); err == nil {
						held[id] = true
					}
				}
			}
			run()
			deletedAt := map[string]int{} // the request count at its deletion
			pick := func() (string, bool) {
				var ids []string
				for id, st := range status {
					if st != "deleted" {
						ids = append(ids, id)
					}
				}
				if len(ids) == 0 {
					return "", false
				}
				slices.Sort(ids)
				return ids[rng.IntN(len(ids))], true
			}
			for range 60 {
				clock.Advance(time.Duration(1+rng.IntN(120)) * time.Second)
				switch rng.IntN(6) {
				case 0:
					add()
				case 1:
					if id, ok := pick(); ok {
						deletedAt[id] = len(q.Requests())
						q.DeleteEstimate(id, clock.Now())
						status[id] = "deleted"
					}
				case 2:
					if id, ok := pick(); ok {
						q.SetEstimateStatus(id, "Accepted", clock.Now())
						status[id] = "signed"
					}
				case 3:
					clock.Advance(time.Hour)
					run()
				case 4:
					if err := sync.Resync(ctx); err != nil {
						t.Fatal(err)
					}
					run()
				case 5:
					// A webhook's read of an estimate, deleted or not.
					id := fmt.Sprint(1 + rng.IntN(next-1))
					_, _ = a.Get(ctx, live, practice.Engagements, "eng_qb-"+id)
				}
			}
			// Settle: polls past every change, and two reconciliations.
			for range 2 {
				clock.Advance(time.Hour)
				run()
				if err := sync.Resync(ctx); err != nil {
					t.Fatal(err)
				}
				run()
			}
			reqs := q.Requests()
			for id, st := range status {
				raw, err := model.Get(ctx, live, practice.Engagements, "eng_qb-"+id)
				if st == "deleted" && !held[id] {
					// Deleted before the copy ever held it: never seen.
					if err == nil {
						t.Fatalf("seed %d: estimate %s, deleted before it was seen, is in the copy: %s", seed, id, raw)
					}
					continue
				}
				if err != nil {
					t.Fatalf("seed %d: estimate %s (%s in QuickBooks): %v", seed, id, st, err)
				}
				want := st
				if st == "deleted" {
					want = "ended"
				}
				if got := decodeEngagement(t, raw).Status; got != want {
					t.Fatalf("seed %d: estimate %s is %s in QuickBooks, %s in the copy; want %s", seed, id, st, got, want)
				}
				if at, ok := deletedAt[id]; ok {
					asked := 0
					for _, r := range reqs[at:] {
						if strings.HasPrefix(r, "GET ") && strings.Contains(r, "/estimate/"+id+"?") || strings.HasSuffix(r, "/estimate/"+id) {
							asked++
						}
					}
					if asked > 1 {
						t.Fatalf("seed %d: deleted estimate %s asked of QuickBooks %d times after its deletion, want at most once", seed, id, asked)
					}
				}
			}
		})
	}
}

// An invoice Intuit's notification names as deleted is removed from the
// copy at once, as invoice.deleted with its tombstone, rather than at the
// next change data capture poll; a deleted estimate's engagement ends at
// once. The CDC poll after finds nothing more to say.
func TestWebhookDeletionsAreSeenAtOnce(t *testing.T) {
	q := vendortest.StartQuickBooks(t)
	clock := vendortest.NewClock(epoch.Add(time.Hour))
	q.SetNow(clock.Now)
	for i := 1; i <= 3; i++ {
		q.AddInvoice(vendortest.QBInvoice{ID: fmt.Sprint(i), DocNumber: fmt.Sprintf("%04d", 1000+i), CustomerID: "7",
			CustomerName: "Birch", TxnDate: epoch, DueDate: epoch.AddDate(0, 0, 30), Total: "100.00", Updated: epoch})
		q.AddEstimate(vendortest.QBEstimate{ID: fmt.Sprint(10 + i), DocNumber: fmt.Sprintf("E%03d", i), CustomerID: "7",
			CustomerName: "Birch", TxnDate: epoch, Lines: []string{"Payroll"}, Total: "300.00", Status: "Pending", Updated: epoch})
	}
	ctx := context.Background()
	a, model, sync := ledgerSync(t, q, clock)
	for range 100 {
		if _, more := sync.Tick(ctx); !more {
			break
		}
	}
	s := &sink{}
	srv := httptest.NewServer(a.Webhook(s))
	t.Cleanup(srv.Close)
	clock.Advance(time.Minute)
	q.Delete("2", clock.Now())
	q.DeleteEstimate("12", clock.Now())
	body := vendortest.QuickBooksCloudEvents(q.RealmID,
		vendortest.QBEvent{Entity: "Invoice", ID: "2", Operation: "Delete", At: clock.Now()},
		vendortest.QBEvent{Entity: "Estimate", ID: "12", Operation: "Delete", At: clock.Now()})
	if code, err := q.Notify(srv.URL, body); err != nil || code != http.StatusOK {
		t.Fatalf("notify: %d %v", code, err)
	}
	got := s.all()
	if len(got) != 2 {
		t.Fatalf("%d changes, want the invoice's removal and the engagement's end: %+v", len(got), got)
	}
	slices.SortFunc(got, func(a, b practice.Change) int { return strings.Compare(b.ResourceID, a.ResourceID) })
	if c := got[0]; c.ResourceID != "inv_qb-2" || string(c.After) != "null" || c.ID != changes.RemovalChange(live, practice.Invoices, "inv_qb-2", nil, epoch).ID {
		t.Errorf("the invoice's change: %s %s", c.ResourceID, c.After)
	}
	if c := got[1]; c.ResourceID != "eng_qb-12" || !strings.Contains(string(c.After), `"status":"ended"`) {
		t.Errorf("the estimate's change: %s %s", c.ResourceID, c.After)
	}
	if ts, err := model.Tombstones(ctx, live, practice.Invoices, practice.TombstoneQuery{}); err != nil || len(ts) != 1 || ts[0].ID != "inv_qb-2" {
		t.Fatalf("tombstones: %+v %v", ts, err)
	}
	// Change data capture then tells the same deletions: nothing more.
	clock.Advance(2 * time.Hour)
	for range 100 {
		if _, more := sync.Tick(ctx); !more {
			break
		}
	}
	if n := len(s.all()); n != 2 {
		t.Fatalf("%d changes after the poll", n)
	}
}
