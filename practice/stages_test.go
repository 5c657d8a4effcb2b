package practice

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestStateName(t *testing.T) {
	for in, want := range map[string]string{
		"In Review":            "in review",
		"  in   REVIEW ":       "in review",
		"ReadyToStart":         "ready to start",
		"InProgress":           "in progress",
		"WIP":                  "wip",
		"e-filed":              "e filed",
		"Client's approval":    "clients approval",
		"Awaiting info / docs": "awaiting info docs",
		"":                     "",
		"--":                   "",
	} {
		if got := StateName(in); got != want {
			t.Errorf("StateName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The states of the vendors' own defaults and of the doubles suggest
// their stages by name; a name that is no stage's stays unmapped.
func TestSuggestStage(t *testing.T) {
	for name, want := range map[string]string{
		// XPM's double: Planned, In Progress, Awaiting info, Completed, Cancelled.
		"Planned": "planned", "In Progress": "in_progress", "Awaiting info": "awaiting_client",
		"Completed": "completed", "Cancelled": "cancelled",
		// Karbon's primary statuses, as PrimaryStatus spells them.
		"ReadyToStart": "ready_to_start", "InProgress": "in_progress", "Waiting": "awaiting_client",
		// Karbon's double's secondary statuses.
		"In Review": "in_review", "Awaiting client approval": "awaiting_client_approval",
		"Waiting on client": "awaiting_client", "Filed": "filed",
		// Other spellings firms use.
		"Manager Review": "in_review", "lodged": "filed", "E-Filed": "filed", "Canceled": "cancelled",
		"awaiting_client_approval": "awaiting_client_approval", "To do": "planned",
	} {
		if got, ok := SuggestStage(name); !ok || got != want {
			t.Errorf("SuggestStage(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"Partner sign-off", "On hold", "In review with partner", "", "Invoiced"} {
		if got, ok := SuggestStage(name); ok {
			t.Errorf("SuggestStage(%q) = %q; want no stage", name, got)
		}
	}
	// Every stage has its own words among its names.
	for _, stage := range JobStages {
		if got, ok := SuggestStage(stage); !ok || got != stage {
			t.Errorf("the stage %s suggests %q, %v", stage, got, ok)
		}
	}
}

func TestCheckStageMap(t *testing.T) {
	if err := CheckStageMap(map[string]string{"Partner sign-off": "in_review", "On hold": ""}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]string{{"Partner sign-off": "review"}, {" - ": "in_review"}} {
		var invalid *InvalidError
		if err := CheckStageMap(m); !errors.As(err, &invalid) || invalid.Param != "stage_map" {
			t.Errorf("%v: %v", m, err)
		}
	}
}

func TestUnmappedStage(t *testing.T) {
	states := []StageState{{State: "Completed", Stage: "completed"}, {State: "Planned", Stage: "planned"},
		{State: "Partner sign-off"}, {State: "Done", Stage: "completed"}}
	mapped := MappedStages(states)
	if !slices.Equal(mapped, []string{"planned", "completed"}) {
		t.Fatalf("mapped %v", mapped)
	}
	var invalid *InvalidError
	err := UnmappedStage("Xero Practice Manager", "job state", "in_review", mapped)
	if !errors.As(err, &invalid) || invalid.Code != "invalid_stage" || !slices.Equal(invalid.Mapped, mapped) ||
		!strings.Contains(invalid.Message, `"in_review"`) || !strings.Contains(invalid.Message, "planned, completed") {
		t.Fatalf("%#v", err)
	}
}

// A firm's map wins over the name's suggestion, matches whatever the
// state's case or spacing, and can leave a suggested state unmapped.
func TestStageNames(t *testing.T) {
	m, err := NewStageNames("xpm", map[string]string{"Sent to client": "awaiting_client_approval", "In Review": "", "wip": "in_progress"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ state, stage, source string }{
		{"sent to Client", "awaiting_client_approval", StageSet},
		{"WIP", "in_progress", StageSet},
		{"In review", "", ""}, // suggested, but the firm leaves it unmapped
		{"Completed", "completed", StageSuggested},
		{"Lunch", "", ""},
		{"", "", ""},
	} {
		if stage, source := m.Of(c.state); stage != c.stage || source != c.source {
			t.Errorf("%q maps to %q (%q), want %q (%q)", c.state, stage, source, c.stage, c.source)
		}
	}
	if _, ok := m.Set("in  REVIEW"); !ok {
		t.Error("the firm's unmapped entry is not found by its normalised name")
	}
	if _, err := NewStageNames("karbon", map[string]string{"Done": "finished"}); err == nil || !strings.Contains(err.Error(), "karbon: stage_map") {
		t.Errorf("a map to no stage: %v", err)
	}
}
