package console

import (
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice/readmodel"
)

// syncRow is one of the firm's real systems as the overview shows it:
// how its copy is kept, how fresh it is and what keeping it costs the
// vendor's budget.
//
// What a firm sees of the cluster is that its records are held, and how
// fresh they are, never where: the instances' addresses (and the sync
// lease's holder) are the operator's, on the admin endpoint.
type syncRow struct {
	readmodel.Status
	Class    string
	Progress string
	// Age is how old the data is; zero until every kind is backfilled.
	Age time.Duration
	// Holders is how many instances hold the firm's copy in memory, when
	// each holds a share of the firms (0 when every one holds every firm).
	Holders int
}

// Calls is the vendor calls of the last hour against the vendor's budget;
// a budget of 0 is unknown and draws no meter.
func (r syncRow) Calls() meter {
	if r.BudgetPerHour <= 0 {
		return meter{}
	}
	frac := float64(r.CallsLastHour) / float64(r.BudgetPerHour)
	class := ""
	switch {
	case frac >= 0.9:
		class = "bad"
	case frac >= 0.7:
		class = "warn"
	}
	return meterOf(frac, class)
}

// Reaching says how each kind's changes reach the gateway: "clients
// notified; polled every 1m as well · jobs polled every 8m".
func (r syncRow) Reaching() string {
	var parts []string
	for _, k := range r.Kinds {
		parts = append(parts, string(k.Kind)+" "+r.Reaches(k.Kind))
	}
	return strings.Join(parts, " · ")
}

// AgeText is the data's age for people.
func (r syncRow) AgeText() string {
	if r.ConfirmedAt.IsZero() {
		return ""
	}
	switch d := r.Age; {
	case d < time.Minute:
		return "under a minute old"
	case d < 2*time.Hour:
		return plural(int64(d.Minutes()), "minute", "minutes") + " old"
	case d < 48*time.Hour:
		return plural(int64(d.Hours()), "hour", "hours") + " old"
	default:
		return plural(int64(d.Hours()/24), "day", "days") + " old"
	}
}

// syncClass colours a sync's state: a backfill is expected work, not a
// problem.
func syncClass(state string) string {
	switch state {
	case readmodel.StateLive:
		return "ok"
	case readmodel.StateLagging:
		return "warn"
	case readmodel.StateFailing:
		return "bad"
	}
	return "idle"
}

// syncRows are the firm's real systems' syncs; none when every system is
// demo records.
func (h *Handler) syncRows(v *visit) []syncRow {
	now := h.now()
	var rows []syncRow
	for _, st := range h.syncs.SyncStatus(v.firm.ID) {
		holders := len(st.HeldBy)
		st.HeldBy, st.Holder = nil, ""
		rows = append(rows, syncRow{Status: st, Class: syncClass(st.State), Progress: st.Progress(), Age: st.Age(now), Holders: holders})
	}
	return rows
}

// resync asks a system's sync to compare every record with the vendor
// now, on whichever instance runs it.
func (h *Handler) resync(w http.ResponseWriter, r *http.Request, v *visit) error {
	system := r.PathValue("system")
	var found *syncRow
	for _, row := range h.syncRows(v) {
		if row.Role == system {
			found = &row
			break
		}
	}
	if found == nil {
		return notFound("real " + system + " system")
	}
	if err := h.syncs.Resync(r.Context(), v.firm.ID, system); err != nil {
		return err
	}
	h.logger.Info("console asked for a resync", zap.String("firm", v.firm.ID), zap.String("system", system),
		zap.String("by", v.cred.ID))
	h.sessions.addFlash(v.sess.ID, flash{Kind: "ok", Text: "Resync of " + found.Label + " (" + system +
		") asked for: every record is compared with " + found.Label + " now, within its budget. Refresh to watch it."})
	return redirect(w, r, "/console#sync")
}
