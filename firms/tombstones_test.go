package firms

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// The retention sweep removes, for each firm with real systems, the
// tombstones older than the retention and keeps the rest.
func TestSweepKeepsTombstonesThirtyDays(t *testing.T) {
	st := boltStore(t)
	open := func() *Runtime {
		r, err := New(context.Background(), Config{Firms: []Firm{{ID: "frm_acme", Systems: []System{{Role: "records",
			Module: &fakeSystem{id: "practicegw.systems.records.karbon", opened: firmsystem.Opened{Reader: noRecords{}}}}}}, {ID: "frm_demo"}}},
			Deps{Logger: zap.NewNop(), Store: st.ReadModel(), State: st, Budget: upstream.NewLocalBudget(nil)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
		return r
	}
	app := open()
	model := app.firms["frm_acme"].systems[0].model

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
	app = open()
	model = app.firms["frm_acme"].systems[0].model

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
	app.SweepTombstones(ctx, now)
	want := []string{"job_edge", "job_recent", "job_undated"}
	if ids := list(model); !slices.Equal(ids, want) {
		t.Fatalf("after the sweep: %v, want %v: the last 30 days, and the undated one dated now", ids, want)
	}
	if ids := list(open().firms["frm_acme"].systems[0].model); !slices.Equal(ids, want) {
		t.Fatalf("after a restart: %v, want %v", ids, want)
	}
	// Dated at the first sweep, the undated one goes with the others.
	app.SweepTombstones(ctx, now.Add(practice.TombstoneRetention+time.Hour))
	if ids := list(open().firms["frm_acme"].systems[0].model); len(ids) != 0 {
		t.Fatalf("after the retention: %v", ids)
	}
}
