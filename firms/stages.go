package firms

import (
	"context"
	"maps"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// StageMap is the stage map of connection c's records system under set
// (nil: the map it has): its vendor's states, read from the vendor, each
// with the stage it maps to. Every instance opens every live connection,
// so any instance answers; connection.ErrNoStageMap when its system has
// no job states of its own (its states are the stages) or is not open
// here (a reconnect under way).
func (r *Runtime) StageMap(ctx context.Context, c connection.Connection, set map[string]string) ([]practice.StageState, error) {
	f := r.firm(c.Firm)
	if f == nil {
		return nil, connection.ErrNoStageMap
	}
	s := f.table.Load().opened(c.ID)
	if s == nil || s.held || s.opened.Stages == nil {
		return nil, connection.ErrNoStageMap
	}
	return s.opened.Stages.StageMap(ctx, set)
}

// keepStageMap gives an open connection's system the stage map its
// administrator edited, when the store's differs from the one it has.
func keepStageMap(open *system, c connection.Connection) error {
	prev := open.current.Load()
	if open.held || open.opened.Stages == nil || prev != nil && maps.Equal(prev.StageMap, c.StageMap) {
		return nil
	}
	return open.opened.Stages.SetStageMap(c.StageMap)
}
