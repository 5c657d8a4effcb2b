package googledrive_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	googledrive "github.com/practicegw/practicegw/adapters/google_drive"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// A connected Google Drive serves the user's files whether the connect
// block's base_url is Google's API origin, as Google publishes it and as
// the app defaults to (https://www.googleapis.com), or the Drive API
// itself (.../drive/v3).
func TestConnectedDriveServesItsFiles(t *testing.T) {
	d := vendortest.NewGDrive()
	defer d.Close()
	d.AddFile("/Ada Client/Tax return 2025.pdf", 1000, "application/pdf", epoch)
	origin := strings.TrimSuffix(d.URL, "/drive/v3")
	for _, base := range []string{origin, d.URL} {
		app := &googledrive.App{OAuthApp: firmsystem.OAuthApp{ClientID: d.Identity.ClientID, ClientSecret: d.Identity.ClientSecret,
			TokenURL: d.Identity.URL + "/token", BaseURL: base}}
		if err := app.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		if err := app.Validate(); err != nil {
			t.Fatal(err)
		}
		id := firmsystem.Namespace("documents") + ".google_drive"
		info, err := caddy.GetModule(id)
		if err != nil {
			t.Fatal(err)
		}
		mod := info.New().(firmsystem.Connectable)
		c := firmsystem.Connection{ID: "con_gd"}
		if err := mod.Configure(app, c); err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(mod)
		if err != nil {
			t.Fatal(err)
		}
		deps := upstream.Deps{State: changes.NewMemoryState()}
		consent := &oauth2.Token{AccessToken: d.Token, RefreshToken: "rt-consent", TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)}
		if err := oauthtoken.Seed(context.Background(), deps, oauthtoken.GDrive, app.Refresh(c.ID), consent); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		loaded, err := cctx.LoadModuleByID(id, raw)
		if err != nil {
			cancel()
			t.Fatalf("base_url %s: the configuration %s: %v", base, raw, err)
		}
		opened, err := loaded.(firmsystem.Module).Open(firmsystem.Deps{Firm: "frm_acme", Upstream: deps})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var names []string
		for _, r := range vendortest.ListAll(t, opened.Reader, live, practice.Documents, practice.Filter{}, 50) {
			var doc practice.Document
			if err := json.Unmarshal(r, &doc); err != nil {
				t.Fatal(err)
			}
			names = append(names, doc.Name)
		}
		cancel()
		if len(names) != 1 || names[0] != "Tax return 2025.pdf" {
			t.Errorf("base_url %s: the drive lists %v, want the one file", base, names)
		}
	}
}
