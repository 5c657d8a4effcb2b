package gateway

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/bolt"
)

// The retention sweep removes, for each firm with real systems, the
// tombstones older than the retention and keeps the rest.
func TestSweepKeepsTombstonesThirtyDays(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	secrets, _ := sealed.Random()
	st, err := bolt.New(db, nil, bolt.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	app := &App{logger: zap.NewNop(), readStore: st.ReadModel(), firms: map[string]*firmBackends{}}
	open := func() *readmodel.Model {
		m := app.newModel("frm_acme")
		m.Serve(practice.Jobs, nil)
		if err := m.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	model := open()
	app.firms["frm_acme"] = &firmBackends{model: model}
	app.firms["frm_demo"] = &firmBackends{}

	ctx := context.Background()
	now := time.Date(2026, 4, 30, 12, 0, 0, 0, time.UTC)
	job := func(id string) readmodel.Update {
		return readmodel.Update{Kind: practice.Jobs, ID: id, Raw: json.RawMessage(`{"id":"` + id + `","object":"job","updated_at":"2026-03-01T09:00:00Z","version":3}`)}
	}
	if err := model.Apply(ctx, []readmodel.Update{job("job_old"), job("job_edge"), job("job_recent"), job("job_undated")}); err != nil {
		t.Fatal(err)
	}
	removal := func(id string, age time.Duration) readmodel.Update {
		return readmodel.Update{Kind: practice.Jobs, ID: id, At: now.Add(-age)}
	}
	if err := model.Apply(ctx, []readmodel.Update{removal("job_old", 31*24*time.Hour),
		removal("job_edge", practice.TombstoneRetention), removal("job_recent", 29*24*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A tombstone as a version before tombstones were dated kept it.
	if err := st.ReadModel().Apply(ctx, "frm_acme", []readmodel.Update{{Kind: practice.Jobs, ID: "job_undated",
		Raw: json.RawMessage(`{"id":"job_undated","deleted":true,"version":3}`)}}); err != nil {
		t.Fatal(err)
	}
	model = open()
	app.firms["frm_acme"].model = model

	list := func(m *readmodel.Model) []string {
		got, err := m.Tombstones(ctx, practice.Tenant{Firm: "frm_acme"}, practice.Jobs, practice.TombstoneQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(got))
		for i, t := range got {
			ids[i] = t.ID
		}
		return ids
	}
	app.sweepTombstones(ctx, now)
	want := []string{"job_edge", "job_recent", "job_undated"}
	if ids := list(model); !slices.Equal(ids, want) {
		t.Fatalf("after the sweep: %v, want %v: the last 30 days, and the undated one dated now", ids, want)
	}
	if ids := list(open()); !slices.Equal(ids, want) {
		t.Fatalf("after a restart: %v, want %v", ids, want)
	}
	// Dated at the first sweep, the undated one goes with the others.
	app.sweepTombstones(ctx, now.Add(practice.TombstoneRetention+time.Hour))
	if ids := list(open()); len(ids) != 0 {
		t.Fatalf("after the retention: %v", ids)
	}
}
