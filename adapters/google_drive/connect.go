package googledrive

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

// App is the Google OAuth client firms connect Google Drive through,
// registered in the connect block (`connect { google_drive { client_id
// ... } }`; firmsystem.OAuthApp's options).
type App struct {
	firmsystem.OAuthApp
}

// published are Google's endpoints.
var published = firmsystem.OAuthApp{
	AuthorizeURL: "https://accounts.google.com/o/oauth2/v2/auth",
	TokenURL:     "https://oauth2.googleapis.com/token",
	RevokeURL:    "https://oauth2.googleapis.com/revoke",
	BaseURL:      "https://www.googleapis.com",
}

// Scopes are the least the adapter asks for: it reads files' metadata
// and the drive's changes (files.list, files.get with fields,
// changes.getStartPageToken, changes.list), never a file's content, which
// drive.metadata.readonly covers (a refresh token comes of
// access_type=offline, not a scope).
var Scopes = []string{"https://www.googleapis.com/auth/drive.metadata.readonly"}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  firmsystem.ConnectNamespace + ".google_drive",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision reads the placeholders and defaults what the operator left
// out to Google's published endpoints.
func (a *App) Provision(caddy.Context) error {
	a.OAuthApp.Provision(published)
	return nil
}

// Validate checks the provisioned app.
func (a *App) Validate() error { return a.OAuthApp.Validate("google_drive") }

// OAuth is the app's client. Google gives a refresh token only to offline
// access, and again only when the user is asked for consent.
func (a *App) OAuth(string) firmsystem.OAuthClient {
	return a.Client(oauth2.AuthStyleInParams, oauthtoken.GDrive, Scopes, oauth2.AccessTypeOffline, oauth2.SetAuthURLParam("prompt", "consent"))
}

// Organisations: a grant reaches the user's one Drive.
func (a *App) Organisations(context.Context, upstream.Deps, string, string) ([]firmsystem.Organisation, error) {
	return nil, nil
}

// Revoke revokes the connection's refresh token (RFC 7009).
func (a *App) Revoke(ctx context.Context, d upstream.Deps, system, connection string) error {
	return a.RevokeGrant(ctx, d, system, connection, a.OAuth(system))
}

// Connects: a firm connects its Google Drive through the Google client.
func (m *Module) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "google_drive", Label: "Google Drive"}
}

// Configure fills the module of a connection: its own tokens.
func (m *Module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*App)
	if !ok {
		return fmt.Errorf("google_drive connects through the google_drive app, not %T", app)
	}
	m.Config = Config{DriveID: c.Organisation, OAuth2: a.Refresh(c.ID), BaseURL: a.Under("/drive/v3")}
	return nil
}

// Interface guards
var (
	_ firmsystem.Consent     = (*App)(nil)
	_ firmsystem.Revoker     = (*App)(nil)
	_ firmsystem.Connectable = (*Module)(nil)
	_ caddy.Provisioner      = (*App)(nil)
	_ caddy.Validator        = (*App)(nil)
	_ caddyfile.Unmarshaler  = (*App)(nil)
)
