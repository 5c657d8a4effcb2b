package gateway

import (
	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/connect"
)

// connectStore is what the connect Manager keeps in the app's store:
// both backends provide it (stores.go).
type connectStore interface {
	connect.Connections
	connect.Authorizations
}

// provisionConnector makes the Manager firms connect their own systems
// through, when the configuration registers vendor apps (the connect
// block) and the store keeps connections.
func (a *App) provisionConnector() {
	store, ok := a.store.(connectStore)
	if a.Connect == nil || !ok {
		return
	}
	a.connector = connect.New(a.Connect, connect.Deps{
		Connections:    store,
		Authorizations: store,
		Firms:          a,
		Runtime:        a,
		Upstream: upstream.Deps{
			Logger: a.logger.Named("connect"),
			Budget: a.budget,
			// Tokens, Karbon access keys and webhook signing keys: the
			// upstream state store, sealed by both backends.
			State: a.upstreamState,
			// One instance at a time steps a connection, and checks
			// Karbon's subscriptions.
			Locks: a.readStore,
		},
	})
}

// Connections is the service behind /v1/connections, the console's
// Systems page and practicegw connect; nil when the configuration
// registers no vendor app.
func (a *App) Connections() api.ConnectionService {
	if a.connector == nil {
		return nil
	}
	return a.connector
}

// FirmName is a firm's display name, false for a firm the gateway does
// not serve.
func (a *App) FirmName(id string) (string, bool) {
	f, ok := a.Firm(id)
	return f.Name, ok
}

// Configured reports whether the firm's Caddyfile block serves role,
// which then takes precedence over any connection: it names a system in
// that role, or its records system keeps that role's kinds too (Xero
// Practice Manager's invoices when the firm names no ledger).
func (a *App) Configured(firm, role string) bool {
	for i := range a.Firms {
		f := &a.Firms[i]
		if f.ID != firm {
			continue
		}
		if f.sets(role) {
			return true
		}
		b := a.firms[firm]
		kinds := firmsystem.Kinds(role)
		return b != nil && b.model != nil && len(kinds) > 0 && b.model.Owns(kinds[0])
	}
	return false
}

// DemoRoles are the roles the firm's block leaves to the demo records
// (Firm.Demo), for the console to say so.
func (a *App) DemoRoles(firm string) []string {
	for _, f := range a.Firms {
		if f.ID == firm {
			return f.Demo
		}
	}
	return nil
}
