package xpm

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/xero"
)

// Connects: a firm connects Xero Practice Manager as its records system
// through the Xero app (the same identity service and organisations),
// choosing its practice among those its grant reaches.
func (m *Module) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "xero", Label: "Xero Practice Manager", Chooses: true}
}

// Configure fills the module of a connection: its practice and its own
// tokens, the API under /practicemanager of the app's base URL.
func (m *Module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*xero.App)
	if !ok {
		return fmt.Errorf("xpm connects through the xero app, not %T", app)
	}
	m.Config = Config{TenantID: c.Organisation, OAuth2: a.Refresh(c.ID), BaseURL: a.Under("/practicemanager")}
	return nil
}

var _ firmsystem.Connectable = (*Module)(nil)
