package connect_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/dropbox"
	googledrive "github.com/practicegw/practicegw/adapters/google_drive"
	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/caddymodule/connect"
)

// A connect block's JSON, as configurations written before the vendor
// apps were modules have it: it loads, and is written back the same, apps
// in their order.
const connectJSON = `{"public_url":"https://gw.example.com/",` +
	`"xero":{"client_id":"{env.CONNECT_TEST_ID}","client_secret":"s"},` +
	`"karbon":{"bearer":"b"},` +
	`"sharepoint":{"client_id":"m","client_secret":"s","token_url":"https://login.example/token"},` +
	`"google_drive":{"client_id":"g","client_secret":"s"},` +
	`"dropbox":{"client_id":"d","client_secret":"s"}}`

func TestConfigJSONKeepsItsShape(t *testing.T) {
	var c connect.Config
	if err := json.Unmarshal([]byte(connectJSON), &c); err != nil {
		t.Fatal(err)
	}
	if c.PublicURL != "https://gw.example.com/" || len(c.Apps) != 5 || c.Apps[1].Name != "karbon" {
		t.Fatalf("read %+v", c)
	}
	out, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != connectJSON {
		t.Fatalf("written back as\n%s\nwant\n%s", out, connectJSON)
	}
	for _, bad := range []string{`[]`, `{"public_url":1}`, `{"xero":{},"xero":{}}`} {
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("%s was read", bad)
		}
	}
}

// Placeholders are expanded, and each endpoint and scope left out is the
// vendor's published one; one the operator set stays. Each app is its
// vendor's module.
func TestProvisionFillsPublishedEndpoints(t *testing.T) {
	t.Setenv("CONNECT_TEST_ID", "xero-app")
	var c connect.Config
	if err := json.Unmarshal([]byte(connectJSON), &c); err != nil {
		t.Fatal(err)
	}
	provision(t, &c)
	x := c.App("xero").(*xero.App)
	ms := c.App("sharepoint").(*sharepoint.App)
	g := c.App("google_drive").(*googledrive.App)
	d := c.App("dropbox").(*dropbox.App)
	k := c.App("karbon").(*karbon.App)
	for _, f := range []struct{ got, want string }{
		{c.PublicURL, "https://gw.example.com"},
		{x.ClientID, "xero-app"},
		{x.AuthorizeURL, "https://login.xero.com/identity/connect/authorize"},
		{x.TokenURL, "https://identity.xero.com/connect/token"},
		{x.RevokeURL, "https://identity.xero.com/connect/revocation"},
		{x.ConnectionsURL, "https://api.xero.com/connections"},
		{x.BaseURL, "https://api.xero.com"},
		{ms.AuthorizeURL, "https://login.microsoftonline.com/common/oauth2/v2.0/authorize"},
		{ms.TokenURL, "https://login.example/token"},
		{ms.RevokeURL, ""},
		{ms.BaseURL, "https://graph.microsoft.com"},
		{strings.Join(ms.OAuth("sharepoint").Config.Scopes, " "), "offline_access Sites.Read.All"},
		{strings.Join(ms.OAuth("onedrive").Config.Scopes, " "), "offline_access Files.Read"},
		{g.AuthorizeURL, "https://accounts.google.com/o/oauth2/v2/auth"},
		{g.TokenURL, "https://oauth2.googleapis.com/token"},
		{g.RevokeURL, "https://oauth2.googleapis.com/revoke"},
		{strings.Join(g.OAuth("google_drive").Config.Scopes, " "), "https://www.googleapis.com/auth/drive.metadata.readonly"},
		{d.AuthorizeURL, "https://www.dropbox.com/oauth2/authorize"},
		{d.TokenURL, "https://api.dropboxapi.com/oauth2/token"},
		{d.RevokeURL, "https://api.dropboxapi.com/2/auth/token/revoke"},
		{k.BaseURL, "https://api.karbonhq.com"},
	} {
		if f.got != f.want {
			t.Errorf("got %q, want %q", f.got, f.want)
		}
	}
	if got := strings.Join(x.OAuth("xero").Config.Scopes, " "); got != "offline_access accounting.invoices.read" {
		t.Errorf("the Xero ledger's consent asks for %s", got)
	}
	if c.App("quickbooks") != nil {
		t.Error("an app the block does not register is provisioned")
	}
}

func TestValidateRefuses(t *testing.T) {
	t.Setenv("CONNECT_TEST_EMPTY", "")
	for _, c := range []struct {
		name, want, json string
	}{
		{"no public url", "public_url", `{}`},
		{"relative public url", "public_url", `{"public_url":"gw.example.com"}`},
		{"public url with a path", "public_url", `{"public_url":"https://gw.example.com/gateway"}`},
		{"ftp", "public_url", `{"public_url":"ftp://gw.example.com"}`},
		{"app without secret", "xero needs client_id and client_secret",
			`{"public_url":"https://gw","xero":{"client_id":"x","client_secret":"{env.CONNECT_TEST_EMPTY}"}}`},
		{"bad endpoint", "dropbox token_url", `{"public_url":"https://gw","dropbox":{"client_id":"x","client_secret":"y","token_url":"/token"}}`},
		{"karbon without bearer", "karbon needs bearer", `{"public_url":"https://gw","karbon":{}}`},
		{"unknown app", `no vendor app "quickbook"`, `{"public_url":"https://gw","quickbook":{}}`},
		{"unknown option", "unknown field", `{"public_url":"https://gw","karbon":{"bearer":"b","tenant":"t"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg connect.Config
			if err := json.Unmarshal([]byte(c.json), &cfg); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
			defer cancel()
			err := cfg.Provision(ctx)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want one saying %q", err, c.want)
			}
		})
	}
}
