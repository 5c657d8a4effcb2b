package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// stageMapConnections are pageConnections with an XPM records connection
// whose stage map they keep.
type stageMapConnections struct {
	*pageConnections
	set   map[string]string
	edits []map[string]*string
}

func (s *stageMapConnections) StageMap(_ context.Context, firm, id string) (connection.StageMapView, error) {
	if firm != "frm_acme" || id != "con_r" {
		return connection.StageMapView{}, connection.ErrNotFound
	}
	states := []practice.StageState{{State: "Planned", Stage: "planned", Source: "suggested"}, {State: "Partner sign-off"}}
	if stage := s.set["Partner sign-off"]; stage != "" {
		states[1].Stage, states[1].Source = stage, "set"
	}
	unmapped := []string{"in_review"}
	if s.set["Partner sign-off"] == "in_review" {
		unmapped = nil
	}
	return connection.StageMapView{Connection: id, Firm: firm, System: "xpm", States: states, Mapped: practice.MappedStages(states),
		Unmapped: unmapped, Set: s.set}, nil
}

func (s *stageMapConnections) EditStageMap(ctx context.Context, firm, id string, edit map[string]*string) (connection.StageMapView, error) {
	s.edits = append(s.edits, edit)
	if p := edit["Partner sign-off"]; p != nil && *p == "planned" {
		return connection.StageMapView{}, practice.Invalid("stage_map", "A refusal the administrator reads.")
	}
	for k, v := range edit {
		if v == nil {
			delete(s.set, k)
		} else {
			s.set[k] = *v
		}
	}
	return s.StageMap(ctx, firm, id)
}

func TestStageMapPage(t *testing.T) {
	rg, conns := systemsRig(t)
	conns.conns = append(conns.conns, connection.View{Connection: connection.Connection{ID: "con_r", Firm: "frm_acme", Role: "records",
		System: "xpm", Status: connection.Connected}})
	sm := &stageMapConnections{pageConnections: conns, set: map[string]string{}}
	rg.h.connList, rg.h.connChange = sm, sm

	if body := rg.do(t, "GET", "/console/systems", nil).Body.String(); !strings.Contains(body, `href="/console/systems/con_r/stage-map"`) {
		t.Fatalf("no link to the stage map on Systems:\n%s", body)
	}
	page := rg.do(t, "GET", "/console/systems/con_r/stage-map", nil)
	body := page.Body.String()
	if page.Code != 200 || !strings.Contains(body, `name="stage.Partner sign-off"`) || !strings.Contains(body, "as its name suggests: planned") ||
		!strings.Contains(body, "No state maps to <code>in_review</code>") {
		t.Fatalf("the page: %d\n%s", page.Code, body)
	}
	form := url.Values{"csrf": {rg.csrf}, "state": {"Planned", "Partner sign-off"}, "stage.Planned": {"suggested"}, "stage.Partner sign-off": {"in_review"}}
	if w := rg.do(t, "POST", "/console/systems/con_r/stage-map", form); w.Code != http.StatusSeeOther ||
		w.Header().Get("Location") != "/console/systems/con_r/stage-map" {
		t.Fatalf("save: %d %s", w.Code, w.Header().Get("Location"))
	}
	if sm.set["Partner sign-off"] != "in_review" || len(sm.edits) != 1 || sm.edits[0]["Planned"] != nil {
		t.Fatalf("saved %v from %v", sm.set, sm.edits)
	}
	body = rg.do(t, "GET", "/console/systems/con_r/stage-map", nil).Body.String()
	if !strings.Contains(body, "The stage map is saved") || !strings.Contains(body, `<option value="in_review" selected>`) || !strings.Contains(body, "Every stage has a state") {
		t.Fatalf("after saving:\n%s", body)
	}
	form.Set("stage.Partner sign-off", "planned")
	rg.do(t, "POST", "/console/systems/con_r/stage-map", form)
	if body := rg.do(t, "GET", "/console/systems/con_r/stage-map", nil).Body.String(); !strings.Contains(body, "A refusal the administrator reads.") {
		t.Fatalf("a refused edit:\n%s", body)
	}
	if w := rg.do(t, "POST", "/console/systems/con_r/stage-map", url.Values{"state": {"Planned"}}); w.Code == http.StatusSeeOther && len(sm.edits) > 2 {
		t.Fatalf("an edit without the CSRF token: %d", w.Code)
	}
}
