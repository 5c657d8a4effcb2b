package dropbox

import (
	"context"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the Dropbox app firms connect Dropbox through, registered in the
// connect block (`connect { dropbox { client_id ... } }`;
// firmsystem.OAuthApp's options).
type App struct {
	firmsystem.OAuthApp
}

// published are Dropbox's endpoints.
var published = firmsystem.OAuthApp{
	AuthorizeURL: "https://www.dropbox.com/oauth2/authorize",
	TokenURL:     "https://api.dropboxapi.com/oauth2/token",
	RevokeURL:    "https://api.dropboxapi.com/2/auth/token/revoke",
	BaseURL:      "https://api.dropboxapi.com",
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  firmsystem.ConnectNamespace + ".dropbox",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision reads the placeholders and defaults what the operator left
// out to Dropbox's published endpoints.
func (a *App) Provision(caddy.Context) error {
	a.OAuthApp.Provision(published)
	return nil
}

// Validate checks the provisioned app.
func (a *App) Validate() error { return a.OAuthApp.Validate("dropbox") }

// Scopes are the least the adapter asks for, of the permissions the app
// is given in Dropbox's console: it lists folders, their changes and a
// file's revisions and metadata (files/list_folder and continue,
// get_latest_cursor, list_revisions, get_metadata), which
// files.metadata.read covers. Without a scope parameter a token would
// get every permission the app has.
var Scopes = []string{"files.metadata.read"}

// OAuth is the app's client; Dropbox gives a refresh token to offline
// access.
func (a *App) OAuth(string) firmsystem.OAuthClient {
	return a.Client(oauth2.AuthStyleInParams, oauthtoken.Dropbox, Scopes, oauth2.SetAuthURLParam("token_access_type", "offline"))
}

// Organisations: a grant reaches the user's one Dropbox.
func (a *App) Organisations(context.Context, upstream.Deps, string, string) ([]firmsystem.Organisation, error) {
	return nil, nil
}

// Revoke revokes the grant with a current access token (Dropbox's
// token/revoke), refreshing it first when it has expired.
func (a *App) Revoke(ctx context.Context, d upstream.Deps, system, connection string) error {
	if a.RevokeURL == "" {
		return nil
	}
	// A grant refused on the way is what a disconnect wants: nobody is
	// told.
	d.GrantRefused = nil
	src, err := oauthtoken.New(oauthtoken.Dropbox, a.Refresh(connection), a.TokenURL, "body", d)
	if err != nil {
		return err
	}
	c, err := upstream.NewClient(upstream.Options{System: system, BaseURL: oauthtoken.Origin(a.RevokeURL), Auth: src}, d)
	if err != nil {
		return err
	}
	return Revoke(ctx, c, a.RevokeURL)
}

// Connects: a firm connects its Dropbox through the Dropbox app.
func (m *Module) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "dropbox", Label: "Dropbox"}
}

// Configure fills the module of a connection: its own tokens.
func (m *Module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*App)
	if !ok {
		return fmt.Errorf("dropbox connects through the dropbox app, not %T", app)
	}
	m.Config = Config{OAuth2: a.Refresh(c.ID), BaseURL: a.BaseURL}
	return nil
}

// Interface guards
var (
	_ firmsystem.Consent     = (*App)(nil)
	_ firmsystem.Revoker     = (*App)(nil)
	_ firmsystem.Deliveries  = (*App)(nil)
	_ firmsystem.Challenger  = (*App)(nil)
	_ firmsystem.Connectable = (*Module)(nil)
	_ caddy.Provisioner      = (*App)(nil)
	_ caddy.Validator        = (*App)(nil)
	_ caddyfile.Unmarshaler  = (*App)(nil)
)
