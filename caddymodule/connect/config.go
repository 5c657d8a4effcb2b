// Package connect lets a firm's administrator connect the firm's own
// systems (POST /v1/connections, the console's Systems page, practicegw
// connect) instead of a platform engineer editing the Caddyfile: the
// OAuth2 consent flow with PKCE and its callback, the choice of the vendor
// organisation, Karbon's access key and the webhook subscriptions the
// gateway makes for it, revocation on disconnect. The vendor apps a
// connection goes through are registered once by the operator, in the
// `connect` block of the practicegw global option (Config).
package connect

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
