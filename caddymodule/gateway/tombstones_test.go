package gateway

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
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
	app := &App{logger: zap.NewNop(), readStore: st.ReadModel(), tombstones: st.Tombstones(), firms: map[string]*firmBackends{}}
	model := app.newModel("frm_acme")
	model.Serve(practice.Jobs, nil)
	app.firms["frm_acme"] = &firmBackends{model: model}
	app.firms["frm_demo"] = &firmBackends{}

	ctx := context.Background()
	now := time.Date(2026, 4, 30, 12, 0, 0, 0, time.UTC)
	ts := func(id string, age time.Duration) practice.Tombstone {
		return practice.NewTombstone(practice.Jobs, id, nil, now.Add(-age))
	}
	if err := st.Tombstones().PutTombstones(ctx, "frm_acme", practice.Jobs, []practice.Tombstone{
		ts("job_old", 31*24*time.Hour), ts("job_edge", practice.TombstoneRetention), ts("job_recent", 29*24*time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	app.sweepTombstones(ctx, now)
	got, err := model.Tombstones(ctx, practice.Tenant{Firm: "frm_acme"}, practice.Jobs, practice.TombstoneQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(got))
	for i, t := range got {
		ids[i] = t.ID
	}
	if !slices.Equal(ids, []string{"job_edge", "job_recent"}) {
		t.Fatalf("after the sweep: %v, want the tombstones of the last 30 days", ids)
	}
}
