package changes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
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
	if id := changes.StateChangeID(tenant, practice.Jobs, "job_1", s.changes[0].After); id != s.changes[0].ID {
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

func job(name string, version int64, updated string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":"job_1","name":%q,"version":%d,"updated_at":%q}`, name, version, updated))
}

// A state read before the one saved (a poll page read before a webhook's
// re-read, delivered after it) neither replaces it nor raises a change
// back; the same new state noticed by a webhook on one instance and a
// poll on another is one change id.
func TestRecorderOrdersByTheVendorsVersion(t *testing.T) {
	ctx := context.Background()
	tenant := practice.Tenant{Firm: "frm_a"}
	state := changes.NewMemoryState()
	first := job("First", 100, "2026-03-02T09:00:00Z")
	second := job("Second", 200, "2026-03-02T09:05:00Z")
	obs := func(after json.RawMessage, noticed string) changes.Observation {
		return changes.Observation{Tenant: tenant, Kind: practice.Jobs, ResourceID: "job_1", After: after, Version: noticed, Created: true}
	}
	s := &sink{}
	webhook := &changes.Recorder{State: state}
	poll := &changes.Recorder{State: state}
	for _, step := range []struct {
		rec *changes.Recorder
		o   changes.Observation
	}{
		{webhook, obs(first, "2026-03-02T09:00:01Z")},
		{webhook, obs(second, "2026-03-02T09:05:01Z")},
		{poll, obs(first, "100")}, // a poll page read before the webhook's re-read
	} {
		if _, err := step.rec.Observe(ctx, s, step.o); err != nil {
			t.Fatal(err)
		}
	}
	if last, _ := state.Last(ctx, changes.StateKey(tenant, practice.Jobs, "job_1")); string(last) != string(second) {
		t.Fatalf("an older read replaced the newer state: %s", last)
	}
	if len(s.changes) != 2 || string(s.changes[1].After) != string(second) {
		t.Fatalf("changes %+v; want First, then Second, and nothing back", s.changes)
	}

	// Another instance's poll notices Second with the record's version.
	other := &sink{}
	if _, err := (&changes.Recorder{State: changes.NewMemoryState()}).Observe(ctx, other,
		changes.Observation{Tenant: tenant, Kind: practice.Jobs, ResourceID: "job_1", After: second, Before: first, Version: "200"}); err != nil {
		t.Fatal(err)
	}
	if len(other.changes) != 1 || other.changes[0].ID != s.changes[1].ID {
		t.Fatalf("the same state noticed two ways: %v and %v", other.changes, s.changes[1].ID)
	}
}
