package firmsystem

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// OAuthApp is a vendor's OAuth2 app as the operator registers it in the
// connect block, the configuration every Consent app embeds. An endpoint
// left empty is the vendor's published one (Provision's defaults).
// Secrets are placeholders ({env.X}, {file.X}) until provisioned.
type OAuthApp struct {
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthorizeURL string `json:"authorize_url,omitempty"`
	TokenURL     string `json:"token_url,omitempty"`
	RevokeURL    string `json:"revoke_url,omitempty"`
	// ConnectionsURL lists the organisations a grant reaches (Xero's
	// GET /connections).
	ConnectionsURL string `json:"connections_url,omitempty"`
	BaseURL        string `json:"base_url,omitempty"`
	// Scopes, when the operator names them, are what every consent of
	// the app asks for; left out, each asks for the least its system
	// needs (the app's Client).
	Scopes []string `json:"scopes,omitempty"`
	// WebhookKey verifies the app's webhooks (Xero signs every
	// organisation's events with the app's one key).
	WebhookKey string `json:"webhook_key,omitempty"`
}

// UnmarshalCaddyfile reads an app's block, the dispenser on its name:
//
//	<app> {
//	    client_id       <id>
//	    client_secret   <secret>
//	    authorize_url   <url>
//	    token_url       <url>
//	    revoke_url      <url>
//	    connections_url <url>
//	    base_url        <url>
//	    scopes          <scope> [<scope>...]
//	    webhook_key     <key>
//	}
func (a *OAuthApp) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return a.UnmarshalCaddyfileWith(d, nil)
}

// UnmarshalCaddyfileWith reads an app's block with the vendor's own
// options beside the common ones: each of extra's names sets its string
// (Intuit's verifier_token).
func (a *OAuthApp) UnmarshalCaddyfileWith(d *caddyfile.Dispenser, extra map[string]*string) error {
	d.Next()
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	fields := map[string]*string{
		"client_id": &a.ClientID, "client_secret": &a.ClientSecret,
		"authorize_url": &a.AuthorizeURL, "token_url": &a.TokenURL, "revoke_url": &a.RevokeURL,
		"connections_url": &a.ConnectionsURL, "base_url": &a.BaseURL, "webhook_key": &a.WebhookKey,
	}
	for name, dst := range extra {
		fields[name] = dst
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "scopes" {
			a.Scopes = d.RemainingArgs()
			if len(a.Scopes) == 0 {
				return d.ArgErr()
			}
			continue
		}
		dst, ok := fields[opt]
		if !ok {
			return d.Errf("unknown connect %s option %q", name, opt)
		}
		if !d.Args(dst) || d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// Provision expands the placeholders of every setting and fills each
// endpoint left empty with the vendor's published one.
func (a *OAuthApp) Provision(published OAuthApp) {
	repl := caddy.NewReplacer()
	for _, f := range []struct {
		v   *string
		def string
	}{
		{&a.ClientID, ""}, {&a.ClientSecret, ""}, {&a.WebhookKey, ""},
		{&a.AuthorizeURL, published.AuthorizeURL}, {&a.TokenURL, published.TokenURL},
		{&a.RevokeURL, published.RevokeURL}, {&a.ConnectionsURL, published.ConnectionsURL},
		{&a.BaseURL, published.BaseURL},
	} {
		*f.v = ExpandValue(repl, *f.v)
		if *f.v == "" {
			*f.v = f.def
		}
	}
}

// ExpandValue is one setting of a connect app with its placeholders read.
func ExpandValue(repl *caddy.Replacer, s string) string {
	return strings.TrimSpace(repl.ReplaceAll(s, ""))
}

// Validate checks a provisioned app, named as the connect block names it:
// its credentials, and that each endpoint is an absolute URL.
func (a *OAuthApp) Validate(name string) error {
	if a.ClientID == "" || a.ClientSecret == "" {
		return fmt.Errorf("connect: %s needs client_id and client_secret", name)
	}
	for _, e := range []struct{ name, v string }{{"authorize_url", a.AuthorizeURL}, {"token_url", a.TokenURL},
		{"revoke_url", a.RevokeURL}, {"connections_url", a.ConnectionsURL}, {"base_url", a.BaseURL}} {
		if e.v == "" {
			continue
		}
		if u, err := url.Parse(e.v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("connect: %s %s %q must be an absolute http(s) URL", name, e.name, e.v)
		}
	}
	return nil
}

// Client is the app as a consent of one of its systems uses it: style is
// how the vendor's token endpoint takes the client's credentials, tokens
// where grants are kept, needs the least scopes the system's adapter
// needs (asked for unless the operator names the app's scopes), params
// the vendor's own authorize parameters.
func (a *OAuthApp) Client(style oauth2.AuthStyle, tokens string, needs []string, params ...oauth2.AuthCodeOption) OAuthClient {
	scopes := needs
	if len(a.Scopes) > 0 {
		scopes = a.Scopes
	}
	return OAuthClient{
		Config: oauth2.Config{ClientID: a.ClientID, ClientSecret: a.ClientSecret, Scopes: slices.Clone(scopes),
			Endpoint: oauth2.Endpoint{AuthURL: a.AuthorizeURL, TokenURL: a.TokenURL, AuthStyle: style}},
		Params: params,
		Tokens: tokens,
	}
}

// Refresh is the refresh grant of connection's own tokens, which its
// consent saved: what a connected module's oauth2 block is. A refresh
// keeps the scopes its consent was given, so it asks for none of its own.
func (a *OAuthApp) Refresh(connection string) upstream.OAuth2Config {
	return upstream.OAuth2Config{ClientID: a.ClientID, ClientSecret: a.ClientSecret, TokenURL: a.TokenURL,
		Connection: connection}
}

// RevokeGrant ends connection's grant of system at the app's revoke_url
// (RFC 7009 with its refresh token), the client authenticating as client
// says; an app with no revoke_url has nothing to call.
func (a *OAuthApp) RevokeGrant(ctx context.Context, d upstream.Deps, system, connection string, client OAuthClient) error {
	if a.RevokeURL == "" {
		return nil
	}
	return oauthtoken.Revoke(ctx, d, system, client.Tokens, a.Refresh(connection), a.RevokeURL, client.Config.Endpoint.AuthStyle)
}

// Under is the API at path under the app's base URL, the vendor's origin
// as published; a base URL that already names the API is taken as it is;
// "" (the module's default) when the app names none.
func (a *OAuthApp) Under(path string) string {
	if a.BaseURL == "" {
		return ""
	}
	base := strings.TrimSuffix(a.BaseURL, "/")
	if strings.HasSuffix(base, path) {
		return base
	}
	return base + path
}
