package xpm_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/practice"
)

// A practice's job states map to the stages their names suggest; a stage
// none maps to is refused naming those that do, until the firm maps a
// state to it; a state the firm unmaps is no longer written.
func TestStageMapOfThePracticesStates(t *testing.T) {
	e := newEnv(t, func(c *xpm.Config) { c.StageMap = nil })
	ctx := context.Background()
	states, err := e.a.StageMap(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []practice.StageState{{State: "Planned", Stage: "planned", Source: "suggested"}, {State: "In Progress", Stage: "in_progress", Source: "suggested"},
		{State: "Awaiting info", Stage: "awaiting_client", Source: "suggested"}, {State: "Completed", Stage: "completed", Source: "suggested"},
		{State: "Cancelled", Stage: "cancelled", Source: "suggested"}}
	if !slices.Equal(states, want) {
		t.Fatalf("the stage map %+v", states)
	}

	mapped := []string{"planned", "awaiting_client", "in_progress", "completed", "cancelled"}
	for _, stage := range []string{"in_review", "ready_to_start", "awaiting_client_approval", "filed"} {
		_, err := e.a.MoveJob(ctx, live, "job_J000001", practice.StageMove{Stage: stage})
		var inv *practice.InvalidError
		if !errors.As(err, &inv) || inv.Code != "invalid_stage" || inv.Param != "stage" || !slices.Equal(inv.Mapped, mapped) ||
			!strings.Contains(inv.Message, strings.Join(mapped, ", ")) || !strings.Contains(inv.Message, `"`+stage+`"`) {
			t.Fatalf("a move to %s: %#v", stage, err)
		}
	}
	if got := e.x.Job("J000001").State; got != "In Progress" {
		t.Fatalf("a refused move left the job %s", got)
	}

	// The firm adds a state of its own in XPM, which no name suggests,
	// and maps it; a map naming a state XPM lacks, or no stage, is refused.
	e.x.AddJobState("Partner sign-off")
	e.clock.Advance(11 * time.Minute) // the states are read again
	set := map[string]string{"Partner sign-off": "in_review", "Awaiting info": ""}
	for _, bad := range []map[string]string{{"Partner signoff ": "in_review"}, {"Partner sign-off": "review"}} {
		if _, err := e.a.StageMap(ctx, bad); !isInvalid(err, "stage_map") {
			t.Errorf("the map %v: %v", bad, err)
		}
	}
	states, err = e.a.StageMap(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	if states[2] != (practice.StageState{State: "Awaiting info"}) ||
		states[5] != (practice.StageState{State: "Partner sign-off", Stage: "in_review", Source: "set"}) {
		t.Fatalf("the map with the firm's entries %+v", states)
	}
	// Shown, not yet set.
	if _, err := e.a.MoveJob(ctx, live, "job_J000001", practice.StageMove{Stage: "in_review"}); !isInvalid(err, "stage") {
		t.Fatalf("a move before the map is set: %v", err)
	}
	if err := e.a.SetStageMap(set); err != nil {
		t.Fatal(err)
	}
	raw, err := e.a.MoveJob(ctx, live, "job_J000001", practice.StageMove{Stage: "in_review"})
	if err != nil {
		t.Fatal(err)
	}
	var j practice.Job
	json.Unmarshal(raw, &j)
	if j.Stage != "in_review" || e.x.Job("J000001").State != "Partner sign-off" {
		t.Fatalf("the move wrote %s: %s", e.x.Job("J000001").State, raw)
	}
	_, err = e.a.MoveJob(ctx, live, "job_J000001", practice.StageMove{Stage: "awaiting_client"})
	var inv *practice.InvalidError
	if !errors.As(err, &inv) || !slices.Equal(inv.Mapped, []string{"planned", "in_progress", "in_review", "completed", "cancelled"}) {
		t.Fatalf("a move to a stage the firm unmapped: %#v", err)
	}
	if err := e.a.SetStageMap(map[string]string{"Planned": "waiting"}); err == nil {
		t.Fatal("a map to no stage was set")
	}
}
