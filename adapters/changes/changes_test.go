package changes_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/changes"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/practice"
)

type sink struct{ changes []practice.Change }

func (s *sink) Publish(_ context.Context, c practice.Change) error {
	s.changes = append(s.changes, c)
	return nil
}

func TestRecorder(t *testing.T) {
	rec := &changes.Recorder{State: changes.NewMemoryState(), Clock: vendortest.NewClock(time.Unix(1_700_000_000, 0))}
	s := &sink{}
	ctx := context.Background()
	tenant := practice.Tenant{Firm: "frm_a"}
	obs := func(v, stage string) changes.Observation {
		after, _ := json.Marshal(map[string]string{"id": "job_1", "stage": stage})
		return changes.Observation{Tenant: tenant, Kind: practice.Jobs, ResourceID: "job_1", After: after, Version: v, Created: v == "v1"}
	}
	for _, step := range []struct {
		o         changes.Observation
		published bool
	}{
		{obs("v1", "planned"), true},
		{obs("v1", "planned"), false}, // the same delivery again
		{obs("v2", "in_review"), true},
	} {
		got, err := rec.Observe(ctx, s, step.o)
		if err != nil || got != step.published {
			t.Fatalf("published %v, %v; want %v", got, err, step.published)
		}
	}
	if len(s.changes) != 2 || s.changes[0].Before != nil || string(s.changes[1].Before) != string(s.changes[0].After) {
		t.Fatalf("changes = %+v", s.changes)
	}
	if s.changes[0].ID == s.changes[1].ID || s.changes[0].ID[:4] != "chg_" {
		t.Fatalf("ids %s %s", s.changes[0].ID, s.changes[1].ID)
	}
	if id := changes.ChangeID(tenant, practice.Jobs, "job_1", "v1", s.changes[0].After); id != s.changes[0].ID {
		t.Fatal("change ids are not deterministic")
	}

	// A record first seen on an update is only remembered; the next
	// change to it has its before.
	other := func(stage string) changes.Observation {
		after, _ := json.Marshal(map[string]string{"id": "job_2", "stage": stage})
		return changes.Observation{Tenant: tenant, Kind: practice.Jobs, ResourceID: "job_2", After: after, Version: stage}
	}
	if got, _ := rec.Observe(ctx, s, other("planned")); got {
		t.Fatal("a record first seen on an update was published with no before")
	}
	if got, _ := rec.Observe(ctx, s, other("filed")); !got || string(s.changes[2].Before) != `{"id":"job_2","stage":"planned"}` {
		t.Fatalf("published %v, changes %+v", got, s.changes)
	}
	// A write that read the record first supplies the before itself.
	known := other("filed")
	known.ResourceID, known.Before = "job_3", json.RawMessage(`{"id":"job_3","stage":"planned"}`)
	if got, _ := rec.Observe(ctx, s, known); !got || string(s.changes[3].Before) != string(known.Before) {
		t.Fatal("a known before was not used")
	}
}
