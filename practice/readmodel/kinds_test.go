package readmodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// Two models of one firm over one shared store, each of its own kinds (a
// firm's records and ledger connected apart): the firm's feed carries
// both models' writes, and each model takes only the kinds it owns, from
// the feed and when it loads, while the writes of both land.
func TestModelsOfOneFirmKeepTheirOwnKinds(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	model := func(k practice.Kind) *readmodel.Model {
		rm := storeOf(t, srv.URL())
		m := readmodel.New(readmodel.Config{Firm: firm, Store: rm, Updates: rm})
		m.Serve(k, nil)
		if err := m.Load(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	jobs, invoices := model(practice.Jobs), model(practice.Invoices)
	inv := json.RawMessage(`{"id":"inv_1","object":"invoice","updated_at":"2026-03-02T09:00:00Z","version":1}`)
	for i := range 5 {
		// Interleaved writes: each model's conditional write finds the
		// other's in the feed and is compared again, not lost.
		if err := jobs.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: job("job_1", []string{"planned", "in_progress"}[i%2])}}); err != nil {
			t.Fatal(err)
		}
		if err := invoices.Apply(ctx, []readmodel.Update{{Kind: practice.Invoices, ID: "inv_1", Raw: inv}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := invoices.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_2", Raw: job("job_2", "planned")}}); err == nil {
		t.Error("a ledger model took a job")
	}
	check := func(name string, jobs, invoices *readmodel.Model) {
		t.Helper()
		for _, m := range []*readmodel.Model{jobs, invoices} {
			if err := m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := jobs.Count(practice.Jobs); got != 1 {
			t.Errorf("%s: the jobs model holds %d jobs, want 1", name, got)
		}
		if got := invoices.Count(practice.Invoices); got != 1 {
			t.Errorf("%s: the ledger model holds %d invoices, want 1", name, got)
		}
		if invoices.Owns(practice.Jobs) || invoices.Count(practice.Jobs) != 0 || jobs.Count(practice.Invoices) != 0 {
			t.Errorf("%s: a model holds another's kind", name)
		}
		if _, err := invoices.Get(ctx, live, practice.Jobs, "job_1"); !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("%s: a job read from the ledger model: %v, want not found", name, err)
		}
		if got := stageOf(t, jobs, "job_1"); got != "planned" {
			t.Errorf("%s: job_1 is %s, want the last write's planned", name, got)
		}
	}
	check("writers", jobs, invoices)
	// Another instance's models, loaded from the store and following the
	// feed from there.
	jobs2, invoices2 := model(practice.Jobs), model(practice.Invoices)
	check("loaded", jobs2, invoices2)
	if err := jobs.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: job("job_1", "completed")}}); err != nil {
		t.Fatal(err)
	}
	if err := invoices2.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if invoices2.Count(practice.Jobs) != 0 {
		t.Error("a ledger model following the feed took a job")
	}
}
