package sharepoint

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

// App is the Microsoft identity app of Graph, registered in the connect
// block (`connect { sharepoint { client_id ... } }`; firmsystem.OAuthApp's
// options): firms connect SharePoint and OneDrive through it.
type App struct {
	firmsystem.OAuthApp
}

// published are Microsoft's endpoints. Microsoft identity offers no
// revocation endpoint: a grant ends when the user or an administrator
// removes the app.
var published = firmsystem.OAuthApp{
	AuthorizeURL: "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
	TokenURL:     "https://login.microsoftonline.com/common/oauth2/v2.0/token",
	BaseURL:      "https://graph.microsoft.com",
}

// Scopes are the least each system asks for, beside offline_access (a
// refresh token), as Graph's permission tables give them (delegated, work
// or school account). SharePoint finds the sites a grant reaches (GET
// /sites?search=, which takes Sites.Read.All and nothing narrower) and
// reads the chosen site's library and its delta, which Sites.Read.All
// covers. OneDrive reads the signed-in user's own drive (GET /me/drive,
// its items and delta), whose least permission is Files.Read.
var Scopes = map[string][]string{
	"sharepoint": {"offline_access", "Sites.Read.All"},
	"onedrive":   {"offline_access", "Files.Read"},
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  firmsystem.ConnectNamespace + ".sharepoint",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision reads the placeholders and defaults what the operator left
// out to Microsoft's published endpoints.
func (a *App) Provision(caddy.Context) error {
	a.OAuthApp.Provision(published)
	return nil
}

// Validate checks the provisioned app.
func (a *App) Validate() error { return a.OAuthApp.Validate("sharepoint") }

// OAuth is the app's client of system (sharepoint or onedrive), asking
// for that system's scopes alone; Microsoft takes the client's
// credentials in the token request's body.
func (a *App) OAuth(system string) firmsystem.OAuthClient {
	return a.Client(oauth2.AuthStyleInParams, oauthtoken.Graph, Scopes[system])
}

// Organisations are the SharePoint sites a grant reaches.
func (a *App) Organisations(ctx context.Context, d upstream.Deps, system, accessToken string) ([]firmsystem.Organisation, error) {
	c, err := upstream.NewClient(upstream.Options{System: system, BaseURL: a.Under("/v1.0"),
		Auth: upstream.Headers{"Authorization": "Bearer " + accessToken}}, d)
	if err != nil {
		return nil, err
	}
	sites, err := Sites(ctx, c)
	if err != nil {
		return nil, err
	}
	out := make([]firmsystem.Organisation, 0, len(sites))
	for _, s := range sites {
		name := s.DisplayName
		if name == "" {
			name = s.Name
		}
		out = append(out, firmsystem.Organisation{ID: s.ID, Name: name})
	}
	return out, nil
}

// Revoke revokes the connection's refresh token (RFC 7009) where the
// operator names a revocation endpoint; Microsoft publishes none.
func (a *App) Revoke(ctx context.Context, d upstream.Deps, system, connection string) error {
	return a.RevokeGrant(ctx, d, system, connection, a.OAuth(system))
}

// Connects: a firm connects a SharePoint site, chosen among those its
// grant reaches, or its one OneDrive, through the Microsoft app.
func (m *module) Connects() firmsystem.Connects {
	c := firmsystem.Connects{App: "sharepoint", Label: m.label, Chooses: m.provider == "sharepoint", Organisation: "drive"}
	if c.Chooses {
		c.Organisation = "site"
	}
	return c
}

// Configure fills the module of a connection: the site chosen, whose
// default document library the module reads (a OneDrive connection
// chooses none: the drive is the signed-in user's), and the connection's
// own tokens. The drive is read from Graph when the module opens, not
// kept on the connection: a connection made before names only its site,
// and the connect flow stays what every system's is, an organisation
// chosen.
func (m *module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*App)
	if !ok {
		return fmt.Errorf("%s connects through the sharepoint app, not %T", m.provider, app)
	}
	m.Config = Config{SiteID: c.Organisation, OAuth2: a.Refresh(c.ID), BaseURL: a.Under("/v1.0")}
	return nil
}

// Interface guards
var (
	_ firmsystem.Consent     = (*App)(nil)
	_ firmsystem.Revoker     = (*App)(nil)
	_ firmsystem.Connectable = (*SharePoint)(nil)
	_ firmsystem.Connectable = (*OneDrive)(nil)
	_ caddy.Provisioner      = (*App)(nil)
	_ caddy.Validator        = (*App)(nil)
	_ caddyfile.Unmarshaler  = (*App)(nil)
)
