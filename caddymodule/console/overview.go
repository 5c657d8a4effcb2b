package console

import (
	"net/http"
)

// overviewView is what needs attention, at a glance.
type overviewView struct {
	Attention   []endpointRow
	Endpoints   int
	Healthy     int
	Deliveries  int
	Attempts    int
	OK          int
	Near        []trafficRow
	Busiest     *trafficRow
	Limited     bool
	Credentials int
	Stale       []accessRow
	// Syncs are the firm's real systems; none for a firm on demo records.
	Syncs []syncRow
}

// SuccessRate is the share of all endpoints' attempts that succeeded in
// the last 24 hours, or -1 without any.
func (o overviewView) SuccessRate() float64 {
	if o.Attempts == 0 {
		return -1
	}
	return float64(o.OK) / float64(o.Attempts)
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	eps, err := h.loadEndpoints(ctx, v)
	if err != nil {
		return err
	}
	view := overviewView{Endpoints: len(eps), Syncs: h.syncRows(v)}
	for _, row := range eps {
		view.Deliveries += row.Stats.Deliveries
		view.Attempts += row.Stats.Attempts
		view.OK += row.Stats.OK
		switch row.Health.Class {
		case "bad", "warn":
			view.Attention = append(view.Attention, row)
		case "ok":
			view.Healthy++
		}
	}
	rows, limited, err := h.trafficRows(ctx, v, false)
	if err != nil {
		return err
	}
	view.Limited = limited
	for i, row := range rows {
		if row.Near() {
			view.Near = append(view.Near, row)
		}
		if i == 0 && row.Total > 0 {
			view.Busiest = &rows[0]
		}
	}
	access, err := h.accessView(ctx, v, issueForm{})
	if err != nil {
		return err
	}
	view.Credentials = access.Active
	for _, row := range access.Rows {
		if row.Stale {
			view.Stale = append(view.Stale, row)
		}
	}
	h.render(w, r, v, http.StatusOK, "overview", "Overview", view)
	return nil
}
