package quickbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

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

// App is the Intuit app firms connect their QuickBooks Online company
// through, registered in the connect block:
//
//	connect {
//	    quickbooks {
//	        client_id      {env.QBO_CLIENT_ID}
//	        client_secret  {env.QBO_CLIENT_SECRET}
//	        authorize_url  https://appcenter.intuit.com/connect/oauth2
//	        token_url      https://oauth.platform.intuit.com/oauth2/v1/tokens/bearer
//	        revoke_url     https://developer.api.intuit.com/v2/oauth2/tokens/revoke
//	        base_url       https://quickbooks.api.intuit.com
//	        verifier_token {env.QBO_VERIFIER_TOKEN}
//	    }
//	}
//
// The consent's callback names the company (realmId): there is none to
// choose. Intuit sends every company's webhooks to the app's one address,
// {public_url}/connect/webhooks/quickbooks, signed with the verifier
// token; each event goes to the connection of its company.
type App struct {
	firmsystem.OAuthApp
	// VerifierToken is the app's webhook verifier token (Intuit's
	// developer portal, the app's Webhooks).
	VerifierToken string `json:"verifier_token,omitempty"`
}

// publishedApp are Intuit's published endpoints.
var publishedApp = firmsystem.OAuthApp{
	AuthorizeURL: "https://appcenter.intuit.com/connect/oauth2",
	TokenURL:     DefaultTokenURL,
	RevokeURL:    "https://developer.api.intuit.com/v2/oauth2/tokens/revoke",
	BaseURL:      DefaultBaseURL,
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  firmsystem.ConnectNamespace + ".quickbooks",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision reads the placeholders and defaults what the operator left
// out to Intuit's published endpoints.
func (a *App) Provision(caddy.Context) error {
	a.OAuthApp.Provision(publishedApp)
	a.VerifierToken = firmsystem.ExpandValue(caddy.NewReplacer(), a.VerifierToken)
	return nil
}

// Validate checks the provisioned app.
func (a *App) Validate() error { return a.OAuthApp.Validate("quickbooks") }

// UnmarshalCaddyfile reads the `quickbooks { ... }` block of connect:
// firmsystem.OAuthApp's options and verifier_token.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return a.OAuthApp.UnmarshalCaddyfileWith(d, map[string]*string{"verifier_token": &a.VerifierToken})
}

// OAuth is the app's client, asking for the one scope of the accounting
// API: Intuit's token endpoint takes the client's credentials in HTTP
// Basic.
func (a *App) OAuth(string) firmsystem.OAuthClient {
	return a.Client(oauth2.AuthStyleInHeader, oauthtoken.Intuit, []string{Scope})
}

// Organisations: Intuit lists no companies for a token; the callback
// names the one consented to (CallbackOrganisations).
func (a *App) Organisations(context.Context, upstream.Deps, string, string) ([]firmsystem.Organisation, error) {
	return nil, fmt.Errorf("quickbooks: the company is the one the consent's callback names")
}

// CallbackOrganisations is the company the consent's callback names
// (realmId) as QuickBooks says the new grant reaches it: the company's
// CompanyInfo, read with the grant's access token (GET
// /v3/company/{realmId}/companyinfo/{realmId}, Intuit's way of confirming
// a realm), which names it too. A callback that names none, or not as
// Intuit writes one, names nothing; a company the token does not reach (a
// realmId changed on the way, or another app's) is firmsystem.ErrNotReached,
// before anything of the grant is kept.
func (a *App) CallbackOrganisations(ctx context.Context, d upstream.Deps, system, accessToken string, callback url.Values) ([]firmsystem.Organisation, error) {
	realm := callback.Get("realmId")
	if !digitsOnly(realm) {
		return nil, nil
	}
	c, err := upstream.NewClient(upstream.Options{System: system, BaseURL: a.BaseURL,
		Auth: upstream.Headers{"Authorization": "Bearer " + accessToken, "Accept": "application/json"}}, d)
	if err != nil {
		return nil, err
	}
	var body struct {
		CompanyInfo *struct {
			CompanyName string
		}
	}
	path := "/v3/company/" + realm + "/companyinfo/" + realm
	_, err = c.JSON(ctx, upstream.Request{Path: path, Query: url.Values{"minorversion": {minorVersion}}}, "company info", &body)
	switch {
	case isStatus(err, http.StatusUnauthorized), isStatus(err, http.StatusForbidden):
		return nil, fmt.Errorf("quickbooks: company %s: %w", realm, firmsystem.ErrNotReached)
	case err != nil:
		return nil, fmt.Errorf("quickbooks: company info: %w", scrub(err))
	case body.CompanyInfo == nil:
		return nil, upstream.Malformed(c.Label(), "company info", errors.New("no CompanyInfo in the answer"))
	}
	name := body.CompanyInfo.CompanyName
	if name == "" {
		name = "QuickBooks company " + realm
	}
	return []firmsystem.Organisation{{ID: realm, Name: name}}, nil
}

// Revoke revokes the connection's refresh token at revoke_url, which
// ends the grant; Intuit takes it as JSON ({"token": ...}) with the
// client's credentials in HTTP Basic.
func (a *App) Revoke(ctx context.Context, d upstream.Deps, system, connection string) error {
	if a.RevokeURL == "" {
		return nil
	}
	tok, err := oauthtoken.Stored(ctx, d, oauthtoken.Intuit, a.Refresh(connection))
	if err != nil || tok == nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"token": tok.RefreshToken})
	req, _ := http.NewRequest(http.MethodPost, a.RevokeURL, nil)
	req.SetBasicAuth(a.ClientID, a.ClientSecret)
	c, err := upstream.NewClient(upstream.Options{System: system, BaseURL: oauthtoken.Origin(a.RevokeURL)}, d)
	if err != nil {
		return err
	}
	if _, err := c.Do(ctx, upstream.Request{Method: http.MethodPost, Path: a.RevokeURL, Body: body,
		Header: http.Header{"Authorization": req.Header["Authorization"]}}); err != nil {
		// The error quotes the path only; the token was in the body.
		return fmt.Errorf("quickbooks: revoke the grant: %w", err)
	}
	return nil
}

// Receives reports whether the app's verifier token is registered.
func (a *App) Receives() bool { return a.VerifierToken != "" }

// Route checks a delivery's intuit-signature under the verifier token
// and names the companies its events are for, in either format.
func (a *App) Route(header http.Header, body []byte) ([]string, error) {
	if a.VerifierToken == "" || !Verified(a.VerifierToken, &http.Request{Header: header}, body) {
		return nil, firmsystem.ErrUnsigned
	}
	events, err := ParseEvents(body)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range events {
		if !seen[e.Realm] {
			seen[e.Realm] = true
			out = append(out, e.Realm)
		}
	}
	return out, nil
}

// Connects: a firm connects its QuickBooks Online company as its ledger
// through the Intuit app; the consent names the company.
func (m *Module) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "quickbooks", Label: "QuickBooks Online", Chooses: true, Organisation: "company"}
}

// Configure fills the module of a connection: its company, its own
// tokens, and the app's verifier token, under which the connection's
// receiver checks the deliveries the app's address hands it.
func (m *Module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*App)
	if !ok {
		return fmt.Errorf("quickbooks connects through the quickbooks app, not %T", app)
	}
	m.Config = Config{RealmID: c.Organisation, OAuth2: a.Refresh(c.ID), BaseURL: a.BaseURL, VerifierToken: a.VerifierToken}
	return nil
}

// Interface guards
var (
	_ firmsystem.Consent     = (*App)(nil)
	_ firmsystem.Revoker     = (*App)(nil)
	_ firmsystem.Deliveries  = (*App)(nil)
	_ firmsystem.Connectable = (*Module)(nil)
	_ caddy.Provisioner      = (*App)(nil)
	_ caddy.Validator        = (*App)(nil)
	_ caddyfile.Unmarshaler  = (*App)(nil)
)
