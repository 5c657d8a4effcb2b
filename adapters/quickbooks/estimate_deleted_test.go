package quickbooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/quickbooks"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

type discard struct{}

func (discard) Publish(context.Context, practice.Change) error { return nil }

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
	store := readmodelsim.NewStore(clock.Now)
	model := readmodel.New(readmodel.Config{Firm: live.Firm, Store: store})
	rec := &changes.Recorder{State: model}
	a, err := quickbooks.New(quickbooks.Config{Firm: live.Firm, RealmID: q.RealmID, BaseURL: q.URL,
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
