package gateway

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/caddymodule/connect"
)

// The connect block is provisioned with the app's other settings: its
// placeholders read and its published endpoints filled, and a block that
// cannot serve a consent refuses to start.
func TestConnectBlockProvisionedWithTheApp(t *testing.T) {
	t.Setenv("CONNECT_APP_TEST_SECRET", "s3cret")
	a := &App{DataDir: t.TempDir(), Connect: &connect.Config{PublicURL: "https://gw.example.com",
		Xero: &connect.OAuthApp{ClientID: "x", ClientSecret: "{env.CONNECT_APP_TEST_SECRET}"}}}
	if err := a.expandSettings(caddy.NewReplacer()); err != nil {
		t.Fatal(err)
	}
	if a.Connect.Xero.ClientSecret != "s3cret" || a.Connect.Xero.TokenURL != "https://identity.xero.com/connect/token" {
		t.Fatalf("provisioned %+v", a.Connect.Xero)
	}
	bad := &App{DataDir: t.TempDir(), Connect: &connect.Config{PublicURL: "https://gw.example.com/api"}}
	if err := bad.expandSettings(caddy.NewReplacer()); err == nil || !strings.Contains(err.Error(), "public_url") {
		t.Fatalf("a public_url with a path: %v", err)
	}
}
