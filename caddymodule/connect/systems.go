package connect

import (
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
)

// system is one vendor system a firm can connect: the role it fills and
// the app it goes through.
type system struct {
	name   string // as the Caddyfile and /v1/connections name it
	role   string
	vendor string // in messages and reasons
	block  string // the connect block's app
	// tokens is the system name its OAuth2 tokens are kept under
	// (oauthtoken); empty for Karbon, which has no OAuth.
	tokens string
	style  oauth2.AuthStyle
	// extras are the vendor's authorize parameters for a refresh token.
	extras []oauth2.AuthCodeOption
	// organisations says how the organisation a grant reaches is found.
	organisations organisations
}

// organisations is how a system's grant names what it reaches.
type organisations int

const (
	oneAccount  organisations = iota // the one drive or account of the grant
	xeroTenants                      // Xero's GET /connections
	graphSites                       // Graph's sites search
)

var systems = map[string]system{
	"karbon": {name: "karbon", role: "records", vendor: "Karbon", block: "karbon"},
	"xpm": {name: "xpm", role: "records", vendor: "Xero Practice Manager", block: "xero", tokens: oauthtoken.Xero,
		style: oauth2.AuthStyleInHeader, organisations: xeroTenants},
	"xero": {name: "xero", role: "ledger", vendor: "Xero", block: "xero", tokens: oauthtoken.Xero,
		style: oauth2.AuthStyleInHeader, organisations: xeroTenants},
	"sharepoint": {name: "sharepoint", role: "documents", vendor: "SharePoint", block: "sharepoint", tokens: oauthtoken.Graph,
		style: oauth2.AuthStyleInParams, organisations: graphSites},
	"onedrive": {name: "onedrive", role: "documents", vendor: "OneDrive", block: "sharepoint", tokens: oauthtoken.Graph,
		style: oauth2.AuthStyleInParams},
	"google_drive": {name: "google_drive", role: "documents", vendor: "Google Drive", block: "google_drive", tokens: oauthtoken.GDrive,
		style:  oauth2.AuthStyleInParams,
		extras: []oauth2.AuthCodeOption{oauth2.AccessTypeOffline, oauth2.SetAuthURLParam("prompt", "consent")}},
	"dropbox": {name: "dropbox", role: "documents", vendor: "Dropbox", block: "dropbox", tokens: oauthtoken.Dropbox,
		style: oauth2.AuthStyleInParams, extras: []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("token_access_type", "offline")}},
}

// roles are the roles a firm connects a system for, with the systems
// each accepts, as the contract lists them.
var roles = map[string][]string{
	"records":   {"karbon", "xpm"},
	"ledger":    {"xero"},
	"documents": {"sharepoint", "onedrive", "google_drive", "dropbox"},
}

// oauthApp is the registered app a system goes through; nil when the
// operator registered none.
func (c *Config) oauthApp(s system) *OAuthApp {
	if c == nil {
		return nil
	}
	switch s.block {
	case "xero":
		return c.Xero
	case "sharepoint":
		return c.SharePoint
	case "google_drive":
		return c.GoogleDrive
	case "dropbox":
		return c.Dropbox
	}
	return nil
}

// registered reports whether the operator registered s's app.
func (c *Config) registered(s system) bool {
	if s.block == "karbon" {
		return c != nil && c.Karbon != nil
	}
	return c.oauthApp(s) != nil
}
