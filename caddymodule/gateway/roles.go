package gateway

import (
	"encoding/json"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/internal/adminapi"
)

// Roles says how each of a firm's roles is served, by the rules its
// reads follow: the firm's Caddyfile system first, else its newest
// connection (connected, or its copy held while it waits for its
// administrator), else the demo records where the firm's block sets the
// role to demo, else nothing (system_not_connected).
func (a *App) Roles(firm string) []adminapi.RoleView {
	var f *Firm
	for i := range a.Firms {
		if a.Firms[i].ID == firm {
			f = &a.Firms[i]
		}
	}
	b := a.firms[firm]
	if f == nil || b == nil {
		return []adminapi.RoleView{}
	}
	want := wantedConnections(a.allConnections())[firm]
	out := make([]adminapi.RoleView, 0, len(roles))
	for _, role := range roles {
		v := adminapi.RoleView{Role: role}
		w := want[role]
		if w.conn != nil {
			v.Connection, v.Status, v.System = w.conn.ID, string(w.conn.Status), w.conn.System
		}
		switch how := w.serving(); {
		case f.sets(role):
			v.Source, v.System = adminapi.SourceCaddyfile, caddyfileSystem(f, role)
		case b.model != nil && b.model.Owns(firmsystem.Kinds(role)[0]):
			// The records system keeps the role's kinds (XPM's invoices
			// for a firm that names no ledger).
			v.Source, v.System = adminapi.SourceCaddyfile, caddyfileSystem(f, "records")
		case how == servedBySystem || how == servedByHeldCopy:
			v.Source = adminapi.SourceConnection
		case b.demo[role] && how == servedByNone:
			v.Source = adminapi.SourceDemo
		default:
			v.Source = adminapi.SourceNotConnected
		}
		out = append(out, v)
	}
	return out
}

// caddyfileSystem is the system the firm's block names in role.
func caddyfileSystem(f *Firm, role string) string {
	raw := map[string]json.RawMessage{"records": f.RecordsRaw, "ledger": f.LedgerRaw, "documents": f.DocumentsRaw}[role]
	var named struct {
		System string `json:"system"`
	}
	_ = json.Unmarshal(raw, &named)
	return named.System
}
