package xero

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/kit/webhooksig"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the Xero app firms connect their Xero organisation (the ledger)
// and Xero Practice Manager through, registered in the connect block
// (`connect { xero { client_id ... } }`; firmsystem.OAuthApp's options).
// Its webhook key checks the app's one webhook address, to which Xero
// sends the events of every organisation that connected it.
type App struct {
	firmsystem.OAuthApp
}

// published are Xero's published endpoints.
var published = firmsystem.OAuthApp{
	AuthorizeURL:   "https://login.xero.com/identity/connect/authorize",
	TokenURL:       "https://identity.xero.com/connect/token",
	RevokeURL:      "https://identity.xero.com/connect/revocation",
	ConnectionsURL: "https://api.xero.com/connections",
	BaseURL:        "https://api.xero.com",
}

// Scopes are the least each system of the app asks for, beside
// offline_access (a refresh token). The ledger reads invoices and quotes
// (GET /Invoices, /Quotes): Xero's granular accounting.invoices.read,
// the only scope of them an app registered since 2 March 2026 may ask for
// (the broad accounting.transactions.read is not offered to it), and no
// Practice Manager scope. Xero Practice Manager (records) reads its
// practice (practicemanager.read covers every list and get its adapter
// makes, invoices, quotes and categories among them, which no narrower
// scope does) and writes clients and jobs (client.api/add, update,
// archive and contacts: practicemanager.client; job.api/add, update,
// assign, state and note: practicemanager.job), as the description's
// security requirements say; no accounting scope.
var Scopes = map[string][]string{
	"xero": {"offline_access", "accounting.invoices.read"},
	"xpm":  {"offline_access", "practicemanager.client", "practicemanager.job", "practicemanager.read"},
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  firmsystem.ConnectNamespace + ".xero",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision reads the placeholders and defaults what the operator left
// out to Xero's published endpoints.
func (a *App) Provision(caddy.Context) error {
	a.OAuthApp.Provision(published)
	return nil
}

// Validate checks the provisioned app.
func (a *App) Validate() error { return a.OAuthApp.Validate("xero") }

// OAuth is the app's client of system (the ledger, xero, or Xero
// Practice Manager, xpm), asking for that system's scopes alone: Xero's
// identity service takes the client's credentials in HTTP Basic.
func (a *App) OAuth(system string) firmsystem.OAuthClient {
	return a.Client(oauth2.AuthStyleInHeader, oauthtoken.Xero, Scopes[system])
}

// Organisations are the organisations a grant reaches (GET /connections).
func (a *App) Organisations(ctx context.Context, d upstream.Deps, system, accessToken string) ([]firmsystem.Organisation, error) {
	c, err := upstream.NewClient(upstream.Options{System: system, BaseURL: oauthtoken.Origin(a.ConnectionsURL),
		Auth: upstream.Headers{"Authorization": "Bearer " + accessToken}}, d)
	if err != nil {
		return nil, err
	}
	cs, err := Connections(ctx, c, a.ConnectionsURL)
	if err != nil {
		return nil, err
	}
	out := make([]firmsystem.Organisation, 0, len(cs))
	for _, x := range cs {
		out = append(out, firmsystem.Organisation{ID: x.TenantID, Name: x.TenantName})
	}
	return out, nil
}

// Revoke revokes the connection's refresh token (RFC 7009), which also
// removes the organisations the grant reached from GET /connections.
func (a *App) Revoke(ctx context.Context, d upstream.Deps, system, connection string) error {
	return a.RevokeGrant(ctx, d, system, connection, a.OAuth(system))
}

// Receives reports whether the app's webhook key is registered.
func (a *App) Receives() bool { return a.WebhookKey != "" }

// Route checks a delivery's x-xero-signature under the app's webhook key
// (Xero's intent-to-receive check sends good and bad ones) and names the
// organisations its events are for.
func (a *App) Route(header http.Header, body []byte) ([]string, error) {
	if a.WebhookKey == "" || !webhooksig.ValidHMAC([]byte(a.WebhookKey), body, header.Get("x-xero-signature")) {
		return nil, firmsystem.ErrUnsigned
	}
	var p webhookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("xero webhook payload unreadable: %w", err)
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range p.Events {
		if !seen[e.TenantID] {
			seen[e.TenantID] = true
			out = append(out, e.TenantID)
		}
	}
	return out, nil
}

// Connects: a firm connects its Xero organisation as its ledger through
// the Xero app, choosing it among those its grant reaches.
func (m *Module) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "xero", Label: "Xero", Chooses: true, Organisation: "organisation"}
}

// Configure fills the module of a connection: its organisation, its own
// tokens, and the app's webhook key, under which the connection's
// receiver checks the deliveries the app's address hands it.
func (m *Module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*App)
	if !ok {
		return fmt.Errorf("xero connects through the xero app, not %T", app)
	}
	m.Config = Config{TenantID: c.Organisation, OAuth2: a.Refresh(c.ID), BaseURL: a.Under("/api.xro/2.0"),
		WebhookKey: a.WebhookKey}
	return nil
}

// Interface guards
// Remembered are the prefixes of firm's invoices' stamps and of its
// engagements' signings when the ledger keeps its engagements (its
// quotes): what a connection's purge forgets.
func (m *Module) Remembered(firm string, kinds []practice.Kind) []string {
	var out []string
	if slices.Contains(kinds, practice.Invoices) {
		out = append(out, stamps.Prefix("xero", firm, practice.Invoices))
	}
	if slices.Contains(kinds, practice.Engagements) {
		out = append(out, proposals.SigningsPrefix(firm))
	}
	return out
}

var (
	_ firmsystem.Consent     = (*App)(nil)
	_ firmsystem.Revoker     = (*App)(nil)
	_ firmsystem.Deliveries  = (*App)(nil)
	_ firmsystem.Connectable = (*Module)(nil)
	_ firmsystem.Remembers   = (*Module)(nil)
	_ caddy.Provisioner      = (*App)(nil)
	_ caddy.Validator        = (*App)(nil)
	_ caddyfile.Unmarshaler  = (*App)(nil)
)
