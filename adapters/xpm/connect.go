package xpm

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Connects: a firm connects Xero Practice Manager as its records system
// through the Xero app (the same identity service and organisations),
// choosing its practice among those its grant reaches.
func (m *Module) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "xero", Label: "Xero Practice Manager", Chooses: true, Organisation: "organisation"}
}

// Configure fills the module of a connection: its practice and its own
// tokens, the API under /practicemanager of the app's base URL, and the
// stage map its administrator edited.
func (m *Module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*xero.App)
	if !ok {
		return fmt.Errorf("xpm connects through the xero app, not %T", app)
	}
	m.Config = Config{TenantID: c.Organisation, OAuth2: a.Refresh(c.ID), BaseURL: a.Under("/practicemanager"), StageMap: c.StageMap}
	return nil
}

// Remembered are the prefixes of firm's stamps of kinds, and of its
// engagements' signings when it keeps them: what a connection's purge
// forgets, so that the next practice's records are stamped when first
// seen there.
func (m *Module) Remembered(firm string, kinds []practice.Kind) []string {
	var out []string
	for _, k := range kinds {
		out = append(out, stamps.Prefix("xpm", firm, k))
		if k == practice.Engagements {
			out = append(out, proposals.SigningsPrefix(firm))
		}
	}
	return out
}

var (
	_ firmsystem.Connectable = (*Module)(nil)
	_ firmsystem.Remembers   = (*Module)(nil)
)
