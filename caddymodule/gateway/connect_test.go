package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/caddymodule/connect"
)

// The connect block is provisioned with the app's other settings: each
// vendor app is loaded as its vendor's module, its placeholders read and
// its published endpoints filled, and a block that cannot serve a consent
// refuses to start.
func TestConnectBlockProvisionedWithTheApp(t *testing.T) {
	t.Setenv("CONNECT_APP_TEST_SECRET", "s3cret")
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	c := connectConfig(t, `{"public_url":"https://gw.example.com","xero":{"client_id":"x","client_secret":"{env.CONNECT_APP_TEST_SECRET}"}}`)
	if err := provisionConnectApps(ctx, c); err != nil {
		t.Fatal(err)
	}
	x, ok := c.App("xero").(*xero.App)
	if !ok || x.ClientSecret != "s3cret" || x.TokenURL != "https://identity.xero.com/connect/token" {
		t.Fatalf("provisioned %#v", c.App("xero"))
	}
	bad := connectConfig(t, `{"public_url":"https://gw.example.com/api"}`)
	if err := provisionConnectApps(ctx, bad); err == nil || !strings.Contains(err.Error(), "public_url") {
		t.Fatalf("a public_url with a path: %v", err)
	}
}

// connectConfig is a connect block from its JSON.
func connectConfig(t *testing.T, raw string) *connect.Config {
	t.Helper()
	var c connect.Config
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}
