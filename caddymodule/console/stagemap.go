package console

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// stageMaps is a connection service that shows and edits the stage map of
// a records connection (connect.Manager).
type stageMaps interface {
	StageMap(ctx context.Context, firm, id string) (connection.StageMapView, error)
	EditStageMap(ctx context.Context, firm, id string, edit map[string]*string) (connection.StageMapView, error)
}

// stageMapView is the page of a connection's stage map: one row per
// vendor state, with a choice of stage.
type stageMapView struct {
	Conn   connection.View
	System string
	Map    connection.StageMapView
	Stages []string
}

// stageChoice is what a state's select says: "suggested" (no entry of the
// firm's), "none" (mapped to nothing), or a stage.
func (v stageMapView) Choice(s practice.StageState) string {
	for k, stage := range v.Map.Set {
		if practice.StateName(k) == practice.StateName(s.State) {
			if stage == "" {
				return "none"
			}
			return stage
		}
	}
	return "suggested"
}

// stageMapPage shows a records connection's stage map as a form.
func (h *Handler) stageMapPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	sm, ok := h.connList.(stageMaps)
	if !ok {
		return notFound("stage map")
	}
	c, err := h.connection(r, v)
	if err != nil {
		return err
	}
	m, err := sm.StageMap(r.Context(), v.firm.ID, c.ID)
	if err != nil {
		return h.connectionRefused(w, r, v, err)
	}
	h.render(w, r, v, http.StatusOK, "stagemap", "Stage map of "+api.SystemName(c.System), stageMapView{
		Conn: c, System: api.SystemName(c.System), Map: m, Stages: practice.JobStages})
	return nil
}

// editStageMap takes the form: each state's choice becomes its entry
// (suggested drops it), and the page is shown again with what it now is.
func (h *Handler) editStageMap(w http.ResponseWriter, r *http.Request, v *visit) error {
	sm, ok := h.connList.(stageMaps)
	if !ok {
		return notFound("stage map")
	}
	id := r.PathValue("id")
	edit := map[string]*string{}
	for _, state := range r.PostForm["state"] {
		choice := r.PostForm.Get("stage." + state)
		switch {
		case choice == "" || choice == "suggested":
			edit[state] = nil
		case choice == "none":
			none := ""
			edit[state] = &none
		default:
			stage := choice
			edit[state] = &stage
		}
	}
	back := "/console/systems/" + id + "/stage-map"
	if _, err := sm.EditStageMap(r.Context(), v.firm.ID, id, edit); err != nil {
		var inv *practice.InvalidError
		if e, ok := apierror.From(err); ok && e.Status < http.StatusInternalServerError && (errors.As(err, &inv) || e.Code == "parameter_invalid") {
			h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: e.Message})
			return redirect(w, r, back)
		}
		return h.connectionRefused(w, r, v, err)
	}
	h.logger.Info("console edited a stage map", zap.String("firm", v.firm.ID), zap.String("connection", id),
		zap.String("by", v.cred.ID), zap.String("states", strings.Join(r.PostForm["state"], ", ")))
	h.sessions.addFlash(v.sess.ID, flash{Kind: "ok", Text: "The stage map is saved: moves follow it from now on."})
	return redirect(w, r, back)
}
