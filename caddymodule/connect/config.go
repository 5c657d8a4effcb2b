// Package connect lets a firm's administrator connect the firm's own
// systems (POST /v1/connections, the console's Systems page, practicegw
// connect) instead of a platform engineer editing the Caddyfile: the
// OAuth2 consent flow with PKCE and its callback, the choice of the vendor
// organisation, Karbon's access key and the webhook subscriptions the
// gateway makes for it, revocation on disconnect. The vendor apps a
// connection goes through are registered once by the operator, in the
// `connect` block of the practicegw global option (Config).
package connect

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// Config is the `connect` block: where the gateway is reached and the
// vendor apps firms connect through. Secrets are placeholders
// ({env.X}, {file.X}) until the app is provisioned.
type Config struct {
	// PublicURL is where browsers and vendors reach the gateway; the
	// consent callback is {public_url}/connect/callback.
	PublicURL string `json:"public_url,omitempty"`
	// Xero is the Xero app: the Xero ledger, and Xero Practice Manager
	// through the same identity service.
	Xero *OAuthApp `json:"xero,omitempty"`
	// Karbon is the Karbon application; firms give access keys.
	Karbon *KarbonApp `json:"karbon,omitempty"`
	// SharePoint is the Microsoft identity app of Graph: SharePoint and
	// OneDrive.
	SharePoint  *OAuthApp `json:"sharepoint,omitempty"`
	GoogleDrive *OAuthApp `json:"google_drive,omitempty"`
	Dropbox     *OAuthApp `json:"dropbox,omitempty"`
}

// OAuthApp is a vendor's OAuth2 app. An endpoint left empty is the
// vendor's published one.
type OAuthApp struct {
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthorizeURL string `json:"authorize_url,omitempty"`
	TokenURL     string `json:"token_url,omitempty"`
	RevokeURL    string `json:"revoke_url,omitempty"`
	// ConnectionsURL lists the organisations a grant reaches (Xero's
	// GET /connections).
	ConnectionsURL string   `json:"connections_url,omitempty"`
	BaseURL        string   `json:"base_url,omitempty"`
	Scopes         []string `json:"scopes,omitempty"`
	// WebhookKey verifies the app's webhooks (Xero signs every
	// organisation's events with the app's one key).
	WebhookKey string `json:"webhook_key,omitempty"`
}

// KarbonApp is the Karbon application: its bearer token, with which a
// firm's access key is used.
type KarbonApp struct {
	Bearer  string `json:"bearer,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
}

// SecretKey is the upstream state key (sealed there) of one of a
// connection's secrets: "access_key" (Karbon), "webhook_key" (the
// signing key of the Karbon subscriptions the gateway made).
func SecretKey(connection, name string) string { return "connection/" + connection + "/" + name }

// The vendors' published endpoints and the scopes the adapters need,
// for what an app leaves empty.
var (
	xeroDefaults = OAuthApp{
		AuthorizeURL:   "https://login.xero.com/identity/connect/authorize",
		TokenURL:       "https://identity.xero.com/connect/token",
		RevokeURL:      "https://identity.xero.com/connect/revocation",
		ConnectionsURL: "https://api.xero.com/connections",
		BaseURL:        "https://api.xero.com",
		// The ledger reads invoices: Xero's granular scope, the only one
		// an app registered since 2 March 2026 may ask for (the broad
		// accounting.transactions.read is not offered to it). Xero
		// Practice Manager reads its practice and writes clients and jobs.
		Scopes: []string{"offline_access", "accounting.invoices.read",
			"practicemanager.client", "practicemanager.job", "practicemanager.read"},
	}
	// Microsoft identity offers no revocation endpoint: a grant ends when
	// the user or an administrator removes the app.
	microsoftDefaults = OAuthApp{
		AuthorizeURL: "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
		TokenURL:     "https://login.microsoftonline.com/common/oauth2/v2.0/token",
		BaseURL:      "https://graph.microsoft.com",
		Scopes:       []string{"offline_access", "Files.Read.All", "Sites.Read.All"},
	}
	googleDefaults = OAuthApp{
		AuthorizeURL: "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL:     "https://oauth2.googleapis.com/token",
		RevokeURL:    "https://oauth2.googleapis.com/revoke",
		BaseURL:      "https://www.googleapis.com",
		Scopes:       []string{"https://www.googleapis.com/auth/drive.readonly"},
	}
	// Dropbox's scopes are the app's permissions, chosen in its console:
	// none is asked for here unless the operator names some.
	dropboxDefaults = OAuthApp{
		AuthorizeURL: "https://www.dropbox.com/oauth2/authorize",
		TokenURL:     "https://api.dropboxapi.com/oauth2/token",
		RevokeURL:    "https://api.dropboxapi.com/2/auth/token/revoke",
		BaseURL:      "https://api.dropboxapi.com",
	}
	karbonBaseURL = "https://api.karbonhq.com"
)

// Provision expands the placeholders ({env.X}, {file.X}) of every setting
// and fills each app's endpoints and scopes left empty with the vendor's
// published ones.
func (c *Config) Provision(repl *caddy.Replacer) {
	expand := func(s *string) { *s = strings.TrimSpace(repl.ReplaceAll(*s, "")) }
	expand(&c.PublicURL)
	c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	for _, a := range []struct {
		app *OAuthApp
		def OAuthApp
	}{{c.Xero, xeroDefaults}, {c.SharePoint, microsoftDefaults}, {c.GoogleDrive, googleDefaults}, {c.Dropbox, dropboxDefaults}} {
		if a.app == nil {
			continue
		}
		for _, f := range []struct {
			v   *string
			def string
		}{
			{&a.app.ClientID, ""}, {&a.app.ClientSecret, ""}, {&a.app.WebhookKey, ""},
			{&a.app.AuthorizeURL, a.def.AuthorizeURL}, {&a.app.TokenURL, a.def.TokenURL},
			{&a.app.RevokeURL, a.def.RevokeURL}, {&a.app.ConnectionsURL, a.def.ConnectionsURL},
			{&a.app.BaseURL, a.def.BaseURL},
		} {
			expand(f.v)
			if *f.v == "" {
				*f.v = f.def
			}
		}
		if len(a.app.Scopes) == 0 {
			a.app.Scopes = slices.Clone(a.def.Scopes)
		}
	}
	if c.Karbon != nil {
		expand(&c.Karbon.Bearer)
		expand(&c.Karbon.BaseURL)
		if c.Karbon.BaseURL == "" {
			c.Karbon.BaseURL = karbonBaseURL
		}
	}
}

// Validate checks a provisioned block: where the gateway is reached, and
// each registered app's credentials.
func (c *Config) Validate() error {
	u, err := url.Parse(c.PublicURL)
	if c.PublicURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("connect: public_url %q must be an absolute http(s) URL without a path, such as https://gw.example.com", c.PublicURL)
	}
	for name, app := range map[string]*OAuthApp{"xero": c.Xero, "sharepoint": c.SharePoint, "google_drive": c.GoogleDrive, "dropbox": c.Dropbox} {
		if app == nil {
			continue
		}
		if app.ClientID == "" || app.ClientSecret == "" {
			return fmt.Errorf("connect: %s needs client_id and client_secret", name)
		}
		for _, e := range []struct{ name, v string }{{"authorize_url", app.AuthorizeURL}, {"token_url", app.TokenURL},
			{"revoke_url", app.RevokeURL}, {"connections_url", app.ConnectionsURL}, {"base_url", app.BaseURL}} {
			if e.v == "" {
				continue
			}
			if u, err := url.Parse(e.v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("connect: %s %s %q must be an absolute http(s) URL", name, e.name, e.v)
			}
		}
	}
	if c.Karbon != nil && c.Karbon.Bearer == "" {
		return fmt.Errorf("connect: karbon needs bearer (the application's bearer token)")
	}
	return nil
}
