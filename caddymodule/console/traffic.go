package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"time"

	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

// trafficWindow is how much usage the traffic page shows.
const trafficWindow = 7 * 24 * time.Hour

// nearCeiling is the share of its ceiling at which a credential is called
// out.
const nearCeiling = 0.8

// trafficRow is one credential's usage against its ceiling.
type trafficRow struct {
	Cred    *credential.Credential
	Traffic usage.Traffic
	// PerHour is the ceiling in requests per hour, whatever its window.
	PerHour float64
	// Used is the share of the ceiling spent right now (1 - headroom).
	Used float64
	// Peak24 is the busiest hour of the last 24 hours.
	Peak24 int64
	// Closeness is how near the ceiling the credential runs: the larger of
	// Used and Peak24 over PerHour.
	Closeness float64
	Total     int64
	Refused   int64
	Refused24 int64
	Chart     template.HTML
}

// Near reports whether the credential deserves a look.
func (t trafficRow) Near() bool { return t.Closeness >= nearCeiling || t.Refused24 > 0 }

// Class colours the row.
func (t trafficRow) Class() string {
	switch {
	case t.Closeness >= 0.95 || t.Refused24 > 0:
		return "bad"
	case t.Closeness >= nearCeiling:
		return "warn"
	}
	return "ok"
}

// trafficRows returns every live credential of the firm with its usage,
// closest to its ceiling first; limited is false when no rate limiter
// serves the gateway's routes.
func (h *Handler) trafficRows(ctx context.Context, v *visit, withCharts bool) (rows []trafficRow, limited bool, err error) {
	creds, err := h.registry.List(ctx, v.firm.ID)
	if err != nil {
		return nil, false, err
	}
	for _, c := range creds {
		if c.RevokedAt != nil {
			continue
		}
		row, ok, err := h.trafficRowOf(ctx, c, withCharts)
		if err != nil || !ok {
			return nil, ok, err
		}
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Closeness != rows[j].Closeness {
			return rows[i].Closeness > rows[j].Closeness
		}
		return rows[i].Total > rows[j].Total
	})
	return rows, true, nil
}

// trafficRowOf reads one credential's last 7 days; ok is false when no
// rate limiter serves the gateway's routes.
func (h *Handler) trafficRowOf(ctx context.Context, c *credential.Credential, withChart bool) (row trafficRow, ok bool, err error) {
	now := h.now()
	start := now.UTC().Truncate(time.Hour).Add(-trafficWindow + time.Hour)
	tr, ok, err := h.usage.Traffic(ctx, c, start)
	if err != nil {
		return trafficRow{}, true, fmt.Errorf("reading the traffic of %s: %w", c.ID, err)
	}
	if !ok {
		return trafficRow{}, false, nil
	}
	row = trafficRow{Cred: c, Traffic: tr}
	if tr.Window > 0 {
		row.PerHour = float64(tr.Limit) * 3600 / float64(tr.Window)
	}
	if tr.Limit > 0 {
		row.Used = min(max(1-float64(tr.Headroom)/float64(tr.Limit), 0), 1)
	}
	for _, u := range tr.Hours {
		row.Total += u.Admitted + u.Refused
		row.Refused += u.Refused
		if now.Sub(u.Hour) <= 24*time.Hour {
			row.Peak24 = max(row.Peak24, u.Admitted+u.Refused)
			row.Refused24 += u.Refused
		}
	}
	row.Closeness = row.Used
	if row.PerHour > 0 {
		row.Closeness = max(row.Closeness, float64(row.Peak24)/row.PerHour)
	}
	if withChart && row.Total > 0 {
		row.Chart = hourlyChart{Start: start, Hours: int(trafficWindow / time.Hour), Usage: tr.Hours, Ceiling: row.PerHour}.SVG()
	}
	return row, true, nil
}

type trafficView struct {
	Rows    []trafficRow
	Limited bool
	Idle    int
}

func (h *Handler) traffic(w http.ResponseWriter, r *http.Request, v *visit) error {
	rows, limited, err := h.trafficRows(r.Context(), v, true)
	if err != nil {
		return err
	}
	view := trafficView{Rows: rows, Limited: limited}
	for _, row := range rows {
		if row.Total == 0 {
			view.Idle++
		}
	}
	h.render(w, r, v, http.StatusOK, "traffic", "Traffic", view)
	return nil
}
