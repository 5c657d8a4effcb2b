package connect_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/caddymodule/connect"
)

// Placeholders are expanded, and each endpoint and scope left out is the
// vendor's published one; one the operator set stays.
func TestProvisionFillsPublishedEndpoints(t *testing.T) {
	t.Setenv("CONNECT_TEST_ID", "xero-app")
	c := &connect.Config{PublicURL: "https://gw.example.com/",
		Xero:        &connect.OAuthApp{ClientID: "{env.CONNECT_TEST_ID}", ClientSecret: "s"},
		SharePoint:  &connect.OAuthApp{ClientID: "m", ClientSecret: "s", TokenURL: "https://login.example/token"},
		GoogleDrive: &connect.OAuthApp{ClientID: "g", ClientSecret: "s"},
		Dropbox:     &connect.OAuthApp{ClientID: "d", ClientSecret: "s"},
		Karbon:      &connect.KarbonApp{Bearer: "b"},
	}
	c.Provision(caddy.NewReplacer())
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ got, want string }{
		{c.PublicURL, "https://gw.example.com"},
		{c.Xero.ClientID, "xero-app"},
		{c.Xero.AuthorizeURL, "https://login.xero.com/identity/connect/authorize"},
		{c.Xero.TokenURL, "https://identity.xero.com/connect/token"},
		{c.Xero.RevokeURL, "https://identity.xero.com/connect/revocation"},
		{c.Xero.ConnectionsURL, "https://api.xero.com/connections"},
		{c.Xero.BaseURL, "https://api.xero.com"},
		{c.SharePoint.AuthorizeURL, "https://login.microsoftonline.com/common/oauth2/v2.0/authorize"},
		{c.SharePoint.TokenURL, "https://login.example/token"},
		{c.SharePoint.RevokeURL, ""},
		{c.SharePoint.BaseURL, "https://graph.microsoft.com"},
		{strings.Join(c.SharePoint.Scopes, " "), "offline_access Files.Read.All Sites.Read.All"},
		{c.GoogleDrive.AuthorizeURL, "https://accounts.google.com/o/oauth2/v2/auth"},
		{c.GoogleDrive.TokenURL, "https://oauth2.googleapis.com/token"},
		{c.GoogleDrive.RevokeURL, "https://oauth2.googleapis.com/revoke"},
		{strings.Join(c.GoogleDrive.Scopes, " "), "https://www.googleapis.com/auth/drive.readonly"},
		{c.Dropbox.AuthorizeURL, "https://www.dropbox.com/oauth2/authorize"},
		{c.Dropbox.TokenURL, "https://api.dropboxapi.com/oauth2/token"},
		{c.Dropbox.RevokeURL, "https://api.dropboxapi.com/2/auth/token/revoke"},
		{c.Karbon.BaseURL, "https://api.karbonhq.com"},
	} {
		if f.got != f.want {
			t.Errorf("got %q, want %q", f.got, f.want)
		}
	}
	if !strings.HasPrefix(strings.Join(c.Xero.Scopes, " "), "offline_access ") {
		t.Errorf("xero scopes %v", c.Xero.Scopes)
	}
}

func TestValidateRefuses(t *testing.T) {
	t.Setenv("CONNECT_TEST_EMPTY", "")
	for _, c := range []struct {
		name, want string
		cfg        connect.Config
	}{
		{"no public url", "public_url", connect.Config{}},
		{"relative public url", "public_url", connect.Config{PublicURL: "gw.example.com"}},
		{"public url with a path", "public_url", connect.Config{PublicURL: "https://gw.example.com/gateway"}},
		{"ftp", "public_url", connect.Config{PublicURL: "ftp://gw.example.com"}},
		{"app without secret", "xero needs client_id and client_secret",
			connect.Config{PublicURL: "https://gw", Xero: &connect.OAuthApp{ClientID: "x", ClientSecret: "{env.CONNECT_TEST_EMPTY}"}}},
		{"bad endpoint", "dropbox token_url", connect.Config{PublicURL: "https://gw",
			Dropbox: &connect.OAuthApp{ClientID: "x", ClientSecret: "y", TokenURL: "/token"}}},
		{"karbon without bearer", "karbon needs bearer", connect.Config{PublicURL: "https://gw", Karbon: &connect.KarbonApp{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Provision(caddy.NewReplacer())
			if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want one saying %q", err, c.want)
			}
		})
	}
}
