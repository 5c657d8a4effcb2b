package connect

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// StageMaps reads the stage map of a records connection's system, open on
// every instance (firms.Runtime).
type StageMaps interface {
	// StageMap is the vendor's states, each with the stage it maps to
	// under set (nil: the map the system has); an entry naming no state
	// of the vendor's is a *practice.InvalidError on stage_map.
	StageMap(ctx context.Context, c connection.Connection, set map[string]string) ([]practice.StageState, error)
}

// StageMap is the stage map of the firm's connection id: its system's
// states as the vendor has them now, mapped by the connection's entries
// over what their names suggest.
func (m *Manager) StageMap(ctx context.Context, firm, id string) (connection.StageMapView, error) {
	c, err := m.load(ctx, firm, id)
	if err != nil {
		return connection.StageMapView{}, err
	}
	return m.stageMapView(ctx, c, c.StageMap)
}

// EditStageMap applies edit, a JSON merge patch (RFC 7396), to the entries of the firm's connection id and
// keeps them with the connection, once the vendor's states show them valid
// (every entry names one of its states and a stage). An entry of edit
// sets a state to a stage, or to "" (it maps to nothing), or removes the
// state's entry (nil: it maps to what its name suggests again). Every
// instance's
// system follows within a look at the store. It answers the map as it now
// is.
func (m *Manager) EditStageMap(ctx context.Context, firm, id string, edit map[string]*string) (connection.StageMapView, error) {
	if len(edit) == 0 {
		return connection.StageMapView{}, practice.Invalid("stage_map", "Name at least one state to map, unmap or reset.")
	}
	c, release, err := m.loadHeld(ctx, firm, id)
	if err != nil {
		return connection.StageMapView{}, err
	}
	defer release()
	set := applyEdit(c.StageMap, edit)
	view, err := m.stageMapView(ctx, c, set)
	if err != nil {
		return connection.StageMapView{}, err
	}
	saved, err := m.write(ctx, c.ID, func(cur *connection.Connection) error {
		if cur.Firm != firm || cur.Attempt != c.Attempt || cur.Status == connection.Disconnected {
			return errConnectionState(*cur, "its stage map cannot be edited now")
		}
		cur.StageMap = applyEdit(cur.StageMap, edit)
		return nil
	})
	if err != nil {
		return connection.StageMapView{}, err
	}
	view.Set = nonNil(saved.StageMap)
	return view, nil
}

// applyEdit is set with edit applied, nil when no entry is left.
func applyEdit(set map[string]string, edit map[string]*string) map[string]string {
	out := maps.Clone(set)
	if out == nil {
		out = map[string]string{}
	}
	for state, stage := range edit {
		// An entry replaces one of the same state however it is spelled.
		for k := range out {
			if practice.StateName(k) == practice.StateName(state) {
				delete(out, k)
			}
		}
		if stage != nil {
			out[state] = *stage
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (m *Manager) stageMapView(ctx context.Context, c connection.Connection, set map[string]string) (connection.StageMapView, error) {
	if c.Role != "records" {
		return connection.StageMapView{}, apierror.New(http.StatusConflict, "connection_state",
			fmt.Sprintf("Connection %s is the firm's %s: only a records system has job states to map.", c.ID, c.Role))
	}
	if !c.Live() || m.d.Stages == nil {
		return connection.StageMapView{}, errConnectionState(c, "its system's job states are read once it is connected")
	}
	if err := practice.CheckStageMap(set); err != nil {
		return connection.StageMapView{}, err
	}
	if set == nil {
		set = map[string]string{} // the connection's own, none: never the system's last
	}
	states, err := m.d.Stages.StageMap(ctx, c, set)
	var inv *practice.InvalidError
	switch {
	case errors.As(err, &inv):
		return connection.StageMapView{}, err
	case errors.Is(err, connection.ErrNoStageMap):
		return connection.StageMapView{}, apierror.New(http.StatusConflict, "connection_state",
			fmt.Sprintf("%s has no job states of its own to map on connection %s, or is not open yet; try again in a moment.", Label(c.System), c.ID))
	case err != nil:
		return connection.StageMapView{}, fmt.Errorf("read the job states of connection %s: %w", c.ID, err)
	}
	mapped := practice.MappedStages(states)
	unmapped := slices.DeleteFunc(slices.Clone(practice.JobStages), func(s string) bool { return slices.Contains(mapped, s) })
	return connection.StageMapView{Connection: c.ID, Firm: c.Firm, System: c.System, SystemName: Label(c.System),
		States: states, Mapped: nonNilSlice(mapped), Unmapped: nonNilSlice(unmapped), Set: nonNil(c.StageMap)}, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
