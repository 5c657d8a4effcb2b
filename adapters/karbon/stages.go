package karbon

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Karbon's five primary work statuses are fixed; firms define secondary
// statuses under them, so the mapping to our stages is configurable.
var (
	primaryStages = map[string]string{
		"planned":      "planned",
		"readytostart": "ready_to_start",
		"inprogress":   "in_progress",
		"waiting":      "awaiting_client",
		"completed":    "completed",
	}
	secondaryStages = map[string]string{
		"in review":                  "in_review",
		"review":                     "in_review",
		"awaiting client approval":   "awaiting_client_approval",
		"waiting on client approval": "awaiting_client_approval",
		"client approval":            "awaiting_client_approval",
		"waiting on client":          "awaiting_client",
		"awaiting client":            "awaiting_client",
		"filed":                      "filed",
		"lodged":                     "filed",
		"cancelled":                  "cancelled",
		"canceled":                   "cancelled",
	}
)

// stageMap is the firm's configured mapping, normalised, with the answers
// it gave kept: a firm has a few dozen statuses, and normalising names for
// every work item of every page would cost more than the rest of the
// translation.
type stageMap struct {
	m    map[string]string
	seen sync.Map // statusKey -> stage
	n    atomic.Int32
}

type statusKey struct{ primary, secondary, workStatus string }

func newStageMap(cfg map[string]string) (*stageMap, error) {
	m := &stageMap{m: map[string]string{}}
	for k, v := range cfg {
		if !practice.ValidStage(v) {
			return nil, fmt.Errorf("karbon: stage_map %q: %q is not one of %v", k, v, practice.JobStages)
		}
		m.m[norm(k)] = v
		m.m[compact(k)] = v
	}
	return m, nil
}

// compact is a primary status as Karbon spells it in PrimaryStatus
// ("ReadyToStart"), lower case: "Ready To Start" and "ReadyToStart" meet.
func compact(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '_' || c == '-' {
			continue
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return string(out)
}

// stage maps a work item's status to our stage, the more specific status
// first: the firm's map for the full work status or the secondary, the
// default for the secondary, then the firm's map and the default for the
// primary. A work item without a known status is planned.
func (m *stageMap) stage(primary, secondary, workStatus string) string {
	k := statusKey{primary, secondary, workStatus}
	if s, ok := m.seen.Load(k); ok {
		return s.(string)
	}
	s := m.lookup(primary, secondary, workStatus)
	// Statuses come from the vendor; stop remembering new ones past a
	// bound no firm reaches.
	if m.n.Add(1) <= 10000 {
		m.seen.Store(k, s)
	}
	return s
}

func (m *stageMap) lookup(primary, secondary, workStatus string) string {
	for _, k := range []string{norm(workStatus), norm(secondary)} {
		if k == "" {
			continue
		}
		if s, ok := m.m[k]; ok {
			return s
		}
	}
	if s, ok := secondaryStages[norm(secondary)]; ok {
		return s
	}
	if s, ok := m.m[compact(primary)]; ok && primary != "" {
		return s
	}
	if s, ok := primaryStages[compact(primary)]; ok {
		return s
	}
	return "planned"
}

// target is the Karbon status a move to stage writes: the first status in
// the tenant's own order that maps to it, a primary before its
// secondaries.
func (m *stageMap) target(statuses []workStatus, stage string) (primary, secondary string, ok bool) {
	for _, p := range statuses {
		if m.stage(p.Name, "", p.Name) == stage {
			return p.Name, "", true
		}
		for _, c := range p.Children {
			if m.stage(p.Name, c.Name, "") == stage {
				return p.Name, c.Name, true
			}
		}
	}
	return "", "", false
}

// primariesFor lists the primary statuses under which stage can occur,
// for pushing a stage filter down as PrimaryStatus eq.
func (m *stageMap) primariesFor(statuses []workStatus, stage string) []string {
	var out []string
	for _, p := range statuses {
		hit := m.stage(p.Name, "", p.Name) == stage
		for _, c := range p.Children {
			hit = hit || m.stage(p.Name, c.Name, "") == stage
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
