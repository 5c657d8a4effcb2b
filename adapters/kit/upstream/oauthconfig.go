package upstream

import (
	"context"
	"net/http"
)

// Rejecter is an Authorizer told that the vendor answered 401 to the
// credentials it put in h: an OAuth2 token source then stops using that
// access token (revoked with its grant, or expired early) and fetches
// another on the next call, which also finds out whether the grant itself
// was refused.
type Rejecter interface {
	Rejected(h http.Header)
}

// KeyRejecter is an Authorizer of a key the vendor may stop taking (a
// firm's Karbon access key), told of every 401 or 403 answered to it, with
// the call's context: it may confirm the refusal with a call of its own
// and tell Deps.GrantRefused.
type KeyRejecter interface {
	KeyRejected(ctx context.Context, status int)
}

// OAuth2Config is how an adapter gets its bearer token. Set AccessToken for
// a token that some other process keeps fresh; otherwise the adapter runs
// the client-credentials grant (no RefreshToken: Microsoft Graph app-only,
// Xero custom connections) or the refresh-token grant (Xero, Google,
// Dropbox offline access) itself, through package oauthtoken. Secrets may
// hold {env.X} placeholders, which the Caddy wiring expands.
type OAuth2Config struct {
	AccessToken  string   `json:"access_token,omitempty"`
	TokenURL     string   `json:"token_url,omitempty"`
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	RefreshToken string   `json:"refresh_token,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	// AuthStyle is how the client authenticates to the token endpoint:
	// "basic" (HTTP Basic, which Xero requires) or "body" (form fields)
	// [the vendor's default].
	AuthStyle string `json:"auth_style,omitempty"`
	// Connection is set by the gateway for a firm's connection made
	// through /v1/connections: the tokens are that connection's alone
	// (two connections on one app never share one), and the refresh
	// token is the one its consent saved in the upstream state store
	// (oauthtoken.Seed), never configured.
	Connection string `json:"connection,omitempty"`
}

// Configured reports whether any way to a token is set.
func (c OAuth2Config) Configured() bool {
	return c.AccessToken != "" || c.TokenURL != "" && c.ClientID != ""
}

// RefreshGrant reports whether the token comes from the refresh-token
// grant: a configured refresh token, or a connection's saved one.
func (c OAuth2Config) RefreshGrant() bool { return c.RefreshToken != "" || c.Connection != "" }
