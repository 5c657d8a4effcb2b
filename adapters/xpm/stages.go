package xpm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Firms define their own job states in XPM, so the mapping to stages is
// the firm's stage map (Config.StageMap: the Caddyfile's, or the
// connection's as its administrator edits it) over what the states' names
// suggest (practice.SuggestStage).
type stageMap struct {
	set practice.StageNames
}

func newStageMap(cfg map[string]string) (*stageMap, error) {
	set, err := practice.NewStageNames("xpm", cfg)
	if err != nil {
		return nil, err
	}
	return &stageMap{set: set}, nil
}

// mapped is the stage state maps to and why; "" when none.
func (m *stageMap) mapped(state string) (stage, source string) { return m.set.Of(state) }

// stage is the stage of a job in state; completed tells an unmapped state
// of a job XPM has completed.
func (m *stageMap) stage(state string, completed bool) string {
	if s, _ := m.mapped(state); s != "" {
		return s
	}
	if completed {
		return "completed"
	}
	return "in_progress"
}

// target is the XPM state a move to stage writes: the first of the
// practice's states, in XPM's order, that maps to it.
func (m *stageMap) target(states []party, stage string) (string, bool) {
	for _, s := range states {
		if got, _ := m.mapped(s.Name); got == stage {
			return s.Name, true
		}
	}
	return "", false
}

// states are the practice's states, in XPM's order, each with the stage
// it maps to.
func (m *stageMap) states(states []party) []practice.StageState {
	out := make([]practice.StageState, 0, len(states))
	for _, s := range states {
		stage, source := m.mapped(s.Name)
		out = append(out, practice.StageState{State: s.Name, Stage: stage, Source: source})
	}
	return out
}

// StageMap is the practice's job states, read from XPM, each with the
// stage it maps to under set, the firm's map (nil: the Caddyfile's, or
// the one last set). An entry of set that names none of the practice's
// states is refused: the firm names a state XPM does not have.
func (a *Adapter) StageMap(ctx context.Context, set map[string]string) ([]practice.StageState, error) {
	m := a.stages.Load()
	if set != nil {
		if err := practice.CheckStageMap(set); err != nil {
			return nil, err
		}
		var err error
		if m, err = newStageMap(set); err != nil {
			return nil, err
		}
	}
	states, err := a.jobStates(ctx)
	if err != nil {
		return nil, err
	}
	for k := range set {
		if !slices.ContainsFunc(states, func(s party) bool { return practice.StateName(s.Name) == practice.StateName(k) }) {
			return nil, practice.Invalid("stage_map", "This firm's Xero Practice Manager has no job state %q; its job states are %s.", k, partyNames(states))
		}
	}
	return m.states(states), nil
}

// SetStageMap makes set the firm's map, over the suggestions: every stage
// a job reads and every move from now on follows it.
func (a *Adapter) SetStageMap(set map[string]string) error {
	m, err := newStageMap(set)
	if err != nil {
		return err
	}
	a.stages.Store(m)
	return nil
}

// partyNames are the names of states, quoted, for a sentence.
func partyNames(states []party) string {
	if len(states) == 0 {
		return "none"
	}
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = fmt.Sprintf("%q", s.Name)
	}
	return strings.Join(names, ", ")
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
