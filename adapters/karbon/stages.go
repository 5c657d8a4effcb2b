package karbon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Karbon's five primary work statuses are fixed; firms define secondary
// statuses under them. The mapping to our stages is the firm's stage map
// (Config.StageMap: the Caddyfile's, or the connection's as its
// administrator edits it) over what the statuses' names suggest
// (practice.SuggestStage: InProgress in_progress, "In Review" in_review,
// Waiting awaiting_client, ...).

// stageMap is the firm's map by the statuses' normalised names, with the
// answers it gave kept: a firm has a few dozen statuses, and normalising
// names for every work item of every page would cost more than the rest
// of the translation.
type stageMap struct {
	set  practice.StageNames
	seen sync.Map // statusKey -> stage
	n    atomic.Int32
}

type statusKey struct{ primary, secondary, workStatus string }

func newStageMap(cfg map[string]string) (*stageMap, error) {
	set, err := practice.NewStageNames("karbon", cfg)
	if err != nil {
		return nil, err
	}
	return &stageMap{set: set}, nil
}

// stage maps a work item's status to our stage (mapped); a work item
// without a status that maps is planned.
func (m *stageMap) stage(primary, secondary, workStatus string) string {
	k := statusKey{primary, secondary, workStatus}
	if s, ok := m.seen.Load(k); ok {
		return s.(string)
	}
	s, _ := m.mapped(primary, secondary, workStatus)
	if s == "" {
		s = "planned"
	}
	// Statuses come from the vendor; stop remembering new ones past a
	// bound no firm reaches.
	if m.n.Add(1) <= 10000 {
		m.seen.Store(k, s)
	}
	return s
}

// mapped is the stage of a status and why, the more specific status
// first: the firm's map for the full work status or the secondary, the
// secondary's name, then the firm's map and the name of the primary,
// whose stage a secondary that maps to nothing takes. "" when none maps.
func (m *stageMap) mapped(primary, secondary, workStatus string) (stage, source string) {
	under := secondary != "" || workStatus != "" && practice.StateName(workStatus) != practice.StateName(primary)
	for _, k := range []string{workStatus, secondary} {
		if k == "" {
			continue
		}
		if s, ok := m.set.Set(k); ok {
			if s != "" {
				return s, practice.StageSet
			}
			secondary = "" // unmapped by the firm: its primary's
		}
	}
	if s, ok := practice.SuggestStage(secondary); ok && secondary != "" {
		return s, practice.StageSuggested
	}
	s, source := m.primary(primary)
	if under && s != "" {
		source = practice.StageUnder
	}
	return s, source
}

// primary is the stage of a primary status and why.
func (m *stageMap) primary(primary string) (stage, source string) { return m.set.Of(primary) }

// target is the Karbon status a move to stage writes: the first status in
// the tenant's own order that maps to it, a primary before its
// secondaries.
func (m *stageMap) target(statuses []workStatus, stage string) (primary, secondary string, ok bool) {
	for _, p := range statuses {
		if s, _ := m.primary(p.Name); s == stage {
			return p.Name, "", true
		}
		for _, c := range p.Children {
			if s, _ := m.mapped(p.Name, c.Name, ""); s == stage {
				return p.Name, c.Name, true
			}
		}
	}
	return "", "", false
}

// states are the tenant's statuses, in Karbon's order, each primary
// followed by its secondaries, with the stage each maps to.
func (m *stageMap) states(statuses []workStatus) []practice.StageState {
	var out []practice.StageState
	for _, p := range statuses {
		stage, source := m.primary(p.Name)
		out = append(out, practice.StageState{State: p.Name, Stage: stage, Source: source})
		for _, c := range p.Children {
			stage, source := m.mapped(p.Name, c.Name, "")
			out = append(out, practice.StageState{State: c.Name, Under: p.Name, Stage: stage, Source: source})
		}
	}
	return out
}

// StageMap is the tenant's work statuses, read from Karbon, each with the
// stage it maps to under set, the firm's map (nil: the Caddyfile's, or
// the one last set). An entry of set that names none of the tenant's
// statuses (a primary, a secondary or "Primary - Secondary") is refused.
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
	statuses, err := a.workStatuses(ctx)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	var names []string
	for _, p := range statuses {
		known[practice.StateName(p.Name)] = true
		names = append(names, fmt.Sprintf("%q", p.Name))
		for _, c := range p.Children {
			known[practice.StateName(c.Name)] = true
			known[practice.StateName(p.Name+" "+c.Name)] = true
			names = append(names, fmt.Sprintf("%q", c.Name))
		}
	}
	for k := range set {
		if !known[practice.StateName(k)] {
			return nil, practice.Invalid("stage_map", "This firm's Karbon has no work status %q; its work statuses are %s.", k, strings.Join(names, ", "))
		}
	}
	return m.states(statuses), nil
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

// primariesFor lists the primary statuses under which stage can occur,
// for pushing a stage filter down as PrimaryStatus eq.
func (m *stageMap) primariesFor(statuses []workStatus, stage string) []string {
	var out []string
	for _, p := range statuses {
		s, _ := m.primary(p.Name)
		hit := s == stage
		for _, c := range p.Children {
			s, _ := m.mapped(p.Name, c.Name, "")
			hit = hit || s == stage
		}
		if hit {
			out = append(out, p.Name)
		}
	}
	return out
}

// workStatuses returns the tenant's work statuses, read at most every ten
// minutes.
func (a *Adapter) workStatuses(ctx context.Context) ([]workStatus, error) {
	return a.settings.Get(a.clock.Now(), 10*time.Minute, func() ([]workStatus, error) {
		var s tenantSettings
		if err := a.getJSON(ctx, "/v3/TenantSettings", "tenant settings", &s); err != nil {
			return nil, fmt.Errorf("karbon: tenant settings: %w", err)
		}
		return s.WorkStatuses, nil
	})
}
