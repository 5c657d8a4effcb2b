package connect_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// vendorStates is a records system's job states as the firms' runtime
// reads them: each mapped by set over what its name suggests, and an
// entry naming no state refused, as the adapters do.
type vendorStates struct {
	states []string
	asked  []map[string]string
}

func (v *vendorStates) StageMap(_ context.Context, _ connection.Connection, set map[string]string) ([]practice.StageState, error) {
	v.asked = append(v.asked, maps.Clone(set))
	for k := range set {
		if !slices.ContainsFunc(v.states, func(s string) bool { return practice.StateName(s) == practice.StateName(k) }) {
			return nil, practice.Invalid("stage_map", "This firm's system has no job state %q.", k)
		}
	}
	var out []practice.StageState
	for _, s := range v.states {
		st := practice.StageState{State: s}
		if stage, ok := set[s]; ok {
			if stage != "" {
				st.Stage, st.Source = stage, practice.StageSet
			}
		} else if stage, ok := practice.SuggestStage(s); ok {
			st.Stage, st.Source = stage, practice.StageSuggested
		}
		out = append(out, st)
	}
	return out, nil
}

// A records connection's stage map is shown from the vendor's states and
// its entries; an edit is checked against them before it is kept with the
// connection, a mistake keeping nothing; a ledger has no stage map.
func TestStageMapOfAConnection(t *testing.T) {
	h := newHarness(t)
	states := &vendorStates{states: []string{"Planned", "In Progress", "Partner sign-off", "On hold"}}
	m := connect.New(h.cfg, connect.Deps{Connections: h.store, Authorizations: h.store, Firms: firms{}, Runtime: h.rt, Stages: states,
		Upstream: upstream.Deps{State: h.state, Clock: h.clock, Locks: h.locks, Logger: zap.NewNop(), Budget: upstream.NewLocalBudget(h.clock)}})
	v := h.check(m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))

	shown, err := m.StageMap(ctx, "frm_a", v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shown.Mapped, []string{"planned", "in_progress"}) || len(shown.Set) != 0 || shown.States[2].Stage != "" ||
		!slices.Contains(shown.Unmapped, "in_review") || shown.SystemName != "Karbon" {
		t.Fatalf("the map shown %+v", shown)
	}

	str := func(s string) *string { return &s }
	for _, bad := range []map[string]*string{
		{"Partner signoff": str("in_review")}, // no such state
		{"Partner sign-off": str("review")},   // no such stage
		{},                                    // nothing to edit
	} {
		_, err := m.EditStageMap(ctx, "frm_a", v.ID, bad)
		h.wantAPIError(err, 400, "parameter_invalid", "stage_map")
	}
	if c, _ := h.store.Connection(ctx, v.ID); c.StageMap != nil {
		t.Fatalf("a refused edit kept %v", c.StageMap)
	}

	edited, err := m.EditStageMap(ctx, "frm_a", v.ID, map[string]*string{"Partner sign-off": str("in_review"), "On hold": str("")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Partner sign-off": "in_review", "On hold": ""}
	if c, _ := h.store.Connection(ctx, v.ID); !maps.Equal(c.StageMap, want) || !maps.Equal(edited.Set, want) ||
		!slices.Equal(edited.Mapped, []string{"planned", "in_progress", "in_review"}) {
		t.Fatalf("the edit kept %v, answered %+v", c.StageMap, edited)
	}
	// A reset drops the entry, however the state is spelled.
	edited, err = m.EditStageMap(ctx, "frm_a", v.ID, map[string]*string{"on HOLD": nil})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := h.store.Connection(ctx, v.ID); !maps.Equal(c.StageMap, map[string]string{"Partner sign-off": "in_review"}) {
		t.Fatalf("after the reset %v", c.StageMap)
	}
	if _, err := m.StageMap(ctx, "frm_b", v.ID); err == nil {
		t.Fatal("another firm read the stage map")
	}

	l := h.check(m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "karbon", AccessKey: h.v.karbonKey}))
	_, err = m.StageMap(ctx, "frm_a", l.ID)
	h.wantAPIError(err, 409, "connection_state", "")
}
