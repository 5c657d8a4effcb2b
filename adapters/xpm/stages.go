package xpm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Firms define their own job states in XPM, so the mapping to stages is
// the defaults with the firm's stage_map over them.
var defaultStages = map[string]string{
	"planned":                  "planned",
	"ready to start":           "ready_to_start",
	"in progress":              "in_progress",
	"awaiting client":          "awaiting_client",
	"awaiting info":            "awaiting_client",
	"waiting on client":        "awaiting_client",
	"in review":                "in_review",
	"review":                   "in_review",
	"awaiting client approval": "awaiting_client_approval",
	"filed":                    "filed",
	"lodged":                   "filed",
	"completed":                "completed",
	"complete":                 "completed",
	"cancelled":                "cancelled",
	"canceled":                 "cancelled",
}

type stageMap struct{ m map[string]string }

func newStageMap(cfg map[string]string) (*stageMap, error) {
	m := &stageMap{m: map[string]string{}}
	for k, v := range defaultStages {
		m.m[k] = v
	}
	for k, v := range cfg {
		if !practice.ValidStage(v) {
			return nil, fmt.Errorf("xpm: stage_map %q: %q is not one of %v", k, v, practice.JobStages)
		}
		m.m[norm(k)] = v
	}
	return m, nil
}

// stage is the stage of a job in state; completed tells an unmapped state
// of a job XPM has completed.
func (m *stageMap) stage(state string, completed bool) string {
	if s, ok := m.m[norm(state)]; ok {
		return s
	}
	if completed {
		return "completed"
	}
	return "in_progress"
}

// known reports whether state is mapped, by the firm or the defaults.
func (m *stageMap) known(state string) bool {
	_, ok := m.m[norm(state)]
	return ok
}

// target is the XPM state a move to stage writes: the first of the
// practice's states, in XPM's order, that maps to it.
func (m *stageMap) target(states []party, stage string) (string, bool) {
	for _, s := range states {
		if m.known(s.Name) && m.stage(s.Name, false) == stage {
			return s.Name, true
		}
	}
	return "", false
}

// jobStates returns the practice's job states, read at most every ten
// minutes.
func (a *Adapter) jobStates(ctx context.Context) ([]party, error) {
	return a.states.Get(a.clock.Now(), 10*time.Minute, func() ([]party, error) {
		var l named
		if err := a.read(ctx, "/v3.1/jobstate.api/list", nil, "job states", &l); err != nil {
			return nil, err
		}
		return l.JobStates, nil
	})
}

// categories returns the practice's job categories, read at most every
// ten minutes.
func (a *Adapter) categories(ctx context.Context) ([]party, error) {
	return a.cats.Get(a.clock.Now(), 10*time.Minute, func() ([]party, error) {
		var l named
		if err := a.read(ctx, "/v3.1/category.api/list", nil, "categories", &l); err != nil {
			return nil, err
		}
		return l.Categories, nil
	})
}

// norm makes a state or name comparable: lower case, single spaces.
func norm(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}
