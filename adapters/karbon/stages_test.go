package karbon_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/practice"
)

// The tenant's work statuses map to the stages their names suggest, a
// secondary with none of its own to its primary's; a stage none maps to
// is refused naming those that do, until the firm maps a status to it.
func TestStageMapOfTheTenantsStatuses(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	ctx := context.Background()
	states, err := a.StageMap(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []practice.StageState{
		{State: "Planned", Stage: "planned", Source: "suggested"},
		{State: "ReadyToStart", Stage: "ready_to_start", Source: "suggested"},
		{State: "InProgress", Stage: "in_progress", Source: "suggested"},
		{State: "In Review", Under: "InProgress", Stage: "in_review", Source: "suggested"},
		{State: "Awaiting client approval", Under: "InProgress", Stage: "awaiting_client_approval", Source: "suggested"},
		{State: "Waiting", Stage: "awaiting_client", Source: "suggested"},
		{State: "Waiting on client", Under: "Waiting", Stage: "awaiting_client", Source: "suggested"},
		{State: "Completed", Stage: "completed", Source: "suggested"},
		{State: "Filed", Under: "Completed", Stage: "filed", Source: "suggested"},
		{State: "Cancelled", Under: "Completed", Stage: "cancelled", Source: "suggested"},
	}
	if !slices.Equal(states, want) {
		t.Fatalf("the stage map %+v", states)
	}
	if got := practice.MappedStages(states); !slices.Equal(got, practice.JobStages) {
		t.Fatalf("Karbon's statuses map %v", got)
	}

	// The firm leaves Filed unmapped: it reads as its primary's, and a
	// move to filed is refused, naming the rest.
	set := map[string]string{"Filed": ""}
	if _, err := a.StageMap(ctx, map[string]string{"Lodged": "filed"}); !isInvalidParam(err, "stage_map") {
		t.Fatalf("a status Karbon lacks: %v", err)
	}
	if err := a.SetStageMap(set); err != nil {
		t.Fatal(err)
	}
	states, _ = a.StageMap(ctx, nil)
	if states[8] != (practice.StageState{State: "Filed", Under: "Completed", Stage: "completed", Source: "under"}) {
		t.Fatalf("an unmapped secondary %+v", states[8])
	}
	_, err = a.MoveJob(ctx, live, "job_W0001", practice.StageMove{Stage: "filed"})
	var inv *practice.InvalidError
	mapped := slices.DeleteFunc(slices.Clone(practice.JobStages), func(s string) bool { return s == "filed" })
	if !errors.As(err, &inv) || inv.Code != "invalid_stage" || !slices.Equal(inv.Mapped, mapped) || !strings.Contains(inv.Message, strings.Join(mapped, ", ")) {
		t.Fatalf("a move to filed: %#v", err)
	}

	// Mapped by its full work status, it is written again.
	if err := a.SetStageMap(map[string]string{"Completed - Filed": "filed", "In Review": "in_review"}); err != nil {
		t.Fatal(err)
	}
	raw, err := a.MoveJob(ctx, live, "job_W0001", practice.StageMove{Stage: "filed"})
	if err != nil {
		t.Fatal(err)
	}
	var j practice.Job
	json.Unmarshal(raw, &j)
	if w, _ := k.WorkItem("W0001"); j.Stage != "filed" || w.PrimaryStatus != "Completed" || w.SecondaryStatus != "Filed" {
		t.Fatalf("the move wrote %s/%s: %s", w.PrimaryStatus, w.SecondaryStatus, raw)
	}
}

func isInvalidParam(err error, param string) bool {
	var inv *practice.InvalidError
	return errors.As(err, &inv) && inv.Param == param
}
