package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/practicegw/practicegw/adapters/dropbox"
	googledrive "github.com/practicegw/practicegw/adapters/google_drive"
	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

// connectionConfig is the module configuration of c's system, as a
// Caddyfile block would give it: the operator's vendor app from the
// connect block, and what the connection holds (its organisation, and
// secrets read from the upstream state store, where they are sealed).
func (a *App) connectionConfig(ctx context.Context, c connection.Connection) (json.RawMessage, error) {
	build, ok := connectionConfigs[c.System]
	if !ok {
		return nil, fmt.Errorf("no system %q to connect", c.System)
	}
	cc := a.Connect
	if cc == nil {
		cc = &connect.Config{}
	}
	cfg, err := build(ctx, a, cc, c)
	if err != nil {
		return nil, err
	}
	return json.Marshal(cfg)
}

// connectionConfigs build each system's module configuration: the
// adapter's Config, which its module's JSON is.
var connectionConfigs = map[string]func(context.Context, *App, *connect.Config, connection.Connection) (any, error){
	"xero": func(_ context.Context, _ *App, cc *connect.Config, c connection.Connection) (any, error) {
		app, err := oauthApp(cc.Xero, "xero")
		if err != nil {
			return nil, err
		}
		return xero.Config{TenantID: literal(c.TenantID), OAuth2: connectionOAuth2(app, c),
			BaseURL: under(app.BaseURL, "/api.xro/2.0"), WebhookKey: app.WebhookKey}, nil
	},
	// XPM is reached through the Xero app: the same identity service and
	// organisations, its API under /practicemanager.
	"xpm": func(_ context.Context, _ *App, cc *connect.Config, c connection.Connection) (any, error) {
		app, err := oauthApp(cc.Xero, "xero")
		if err != nil {
			return nil, err
		}
		return xpm.Config{TenantID: literal(c.TenantID), OAuth2: connectionOAuth2(app, c),
			BaseURL: under(app.BaseURL, "/practicemanager")}, nil
	},
	"karbon": func(ctx context.Context, a *App, cc *connect.Config, c connection.Connection) (any, error) {
		if cc.Karbon == nil {
			return nil, fmt.Errorf("the connect block has no karbon application")
		}
		key, err := a.connectionSecret(ctx, c, "access_key")
		if err != nil {
			return nil, err
		}
		// Made when the subscriptions were; none yet refuses every
		// webhook, as the adapter does without a key.
		signing, err := a.connectionSecret(ctx, c, "webhook_key")
		if err != nil {
			return nil, err
		}
		return karbon.Config{AccessKey: literal(key), Bearer: cc.Karbon.Bearer,
			BaseURL: cc.Karbon.BaseURL, WebhookSigningKey: literal(signing)}, nil
	},
	"sharepoint": graphConfig,
	"onedrive":   graphConfig,
	"google_drive": func(_ context.Context, _ *App, cc *connect.Config, c connection.Connection) (any, error) {
		app, err := oauthApp(cc.GoogleDrive, "google_drive")
		if err != nil {
			return nil, err
		}
		return googledrive.Config{DriveID: literal(c.TenantID), OAuth2: connectionOAuth2(app, c),
			BaseURL: app.BaseURL}, nil
	},
	"dropbox": func(_ context.Context, _ *App, cc *connect.Config, c connection.Connection) (any, error) {
		app, err := oauthApp(cc.Dropbox, "dropbox")
		if err != nil {
			return nil, err
		}
		return dropbox.Config{OAuth2: connectionOAuth2(app, c), BaseURL: app.BaseURL}, nil
	},
}

// graphConfig is SharePoint's or OneDrive's: the drive the administrator
// chose, through the Microsoft identity app.
func graphConfig(_ context.Context, _ *App, cc *connect.Config, c connection.Connection) (any, error) {
	app, err := oauthApp(cc.SharePoint, "sharepoint")
	if err != nil {
		return nil, err
	}
	return sharepoint.Config{DriveID: literal(c.TenantID), OAuth2: connectionOAuth2(app, c), BaseURL: app.BaseURL}, nil
}

func oauthApp(app *connect.OAuthApp, name string) (*connect.OAuthApp, error) {
	if app == nil {
		return nil, fmt.Errorf("the connect block has no %s app", name)
	}
	return app, nil
}

// connectionOAuth2 is the refresh grant of c's own tokens, which its
// consent saved (oauthtoken.Seed).
func connectionOAuth2(app *connect.OAuthApp, c connection.Connection) upstream.OAuth2Config {
	return upstream.OAuth2Config{ClientID: app.ClientID, ClientSecret: app.ClientSecret, TokenURL: app.TokenURL,
		Scopes: app.Scopes, Connection: literal(c.ID)}
}

// under is the API at path under a vendor's base URL; empty leaves the
// adapter's default.
func under(base, path string) string {
	if base == "" {
		return ""
	}
	return strings.TrimSuffix(base, "/") + path
}

// connectionSecret reads one of c's secrets from the upstream state
// store; "" when none was saved.
func (a *App) connectionSecret(ctx context.Context, c connection.Connection, name string) (string, error) {
	raw, err := a.upstreamState.Last(ctx, connect.SecretKey(c.ID, name))
	if err != nil {
		return "", fmt.Errorf("reading the connection's %s: %w", name, err)
	}
	return string(raw), nil
}

// literal escapes the braces of a value a firm gave (a tenant id, an
// access key) so that the module, which expands placeholders in its
// configuration, takes it as it is: never a {file.…} or {env.…} of the
// gateway's.
func literal(s string) string {
	return strings.NewReplacer(`{`, `\{`, `}`, `\}`).Replace(s)
}
