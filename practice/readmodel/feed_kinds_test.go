package readmodel_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/quickbooks"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// One change feed answering two kinds (QuickBooks' change data capture:
// invoices, and estimates as the page's Others) keeps both current: an
// estimate accepted after the backfill is read by the next poll, without
// waiting for a reconciliation, as one change record.
func TestOneFeedKeepsEveryKindOfTheSync(t *testing.T) {
	q := vendortest.StartQuickBooks(t)
	q.AddInvoice(vendortest.QBInvoice{ID: "1", DocNumber: "1001", CustomerID: "7", CustomerName: "Birch",
		TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "10.00", Updated: epoch})
	q.AddEstimate(vendortest.QBEstimate{ID: "5", DocNumber: "E5", CustomerID: "7", CustomerName: "Birch",
		TxnDate: epoch, Lines: []string{"Payroll"}, Total: "300.00", Updated: epoch})
	e := newEnv(t, karbonDouble(t), openDB(t, t.TempDir()))
	model := readmodel.New(readmodel.Config{Firm: firm, Store: e.store})
	rec := &changes.Recorder{State: model}
	a, err := quickbooks.New(quickbooks.Config{Firm: firm, RealmID: q.RealmID, BaseURL: q.URL,
		OAuth2: upstream.OAuth2Config{AccessToken: q.Token}}, upstream.Deps{State: model, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []practice.Kind{practice.Invoices, practice.Engagements}
	for _, k := range kinds {
		model.Serve(k, a)
	}
	if err := model.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", Label: "quickbooks", Kinds: kinds, Reader: a},
		readmodel.SyncDeps{Model: model, Recorder: rec, Sink: e.sink, Checkpoints: e.store, Leases: e.store, Holder: "one"},
		readmodel.SyncConfig{Poll: 50 * time.Millisecond, LeaseTTL: time.Second, Reconcile: time.Hour})
	run(t, s)
	waitFor(t, "the backfill", live_(s))
	if e.sink.count() != 0 {
		t.Fatalf("the backfill recorded %d changes", e.sink.count())
	}
	q.SetEstimateStatus("5", "Accepted", time.Now().UTC())
	waitFor(t, "the poll to read the acceptance", func() bool {
		raw, err := model.Get(context.Background(), live, practice.Engagements, "eng_qb-5")
		var en practice.Engagement
		return err == nil && json.Unmarshal(raw, &en) == nil && en.Status == "signed" && en.SignedAt != nil
	})
	waitFor(t, "two more polls", pollsAfter(s))
	if n := len(e.sink.of("eng_qb-5")); n != 1 {
		t.Errorf("%d change records for the acceptance, want 1", n)
	}
}
