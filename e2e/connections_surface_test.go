package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// The connection surface on the root Caddyfile: the consent's start and
// callback are answered by practicegw_api through the site's catch-all,
// the vendors' webhook addresses by practicegw_ingest, their front door
// (the contract's body, not Caddy's empty 404), with no credential;
// /v1/connections refuses a sandbox credential and a credential without
// admin; the OpenAPI document names every route of the API.
func TestConnectionSurfaceOnTheRootCaddyfile(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	for _, rt := range [][2]string{{"GET", "/connect/callback?state=forged&code=c0de"}, {"GET", "/connect/start/c0de"},
		{"POST", "/connect/webhooks/xero"},
		{"POST", "/connect/webhooks/karbon/con_unknown"}, {"POST", "/ingest/frm_acme/karbon"}} {
		r := g.do(t, rt[0], rt[1], "", nil)
		if r.StatusCode < 400 || r.StatusCode >= 500 || r.Header.Get("Request-Id") == "" {
			t.Errorf("%s %s: %d %s", rt[0], rt[1], r.StatusCode, r.body)
			continue
		}
		if code := r.errorCode(t); code != "resource_not_found" && code != "invalid_state" {
			t.Errorf("%s %s: %s", rt[0], rt[1], r.body)
		}
		if strings.Contains(string(r.body), "c0de") {
			t.Errorf("%s %s shows the code: %s", rt[0], rt[1], r.body)
		}
	}
	sandbox := g.issue("frm_acme", true, "admin").Token
	reader := g.issue("frm_acme", false, "clients:read").Token
	for _, tt := range []struct {
		token, why string
	}{{sandbox, "a sandbox credential"}, {reader, "a credential without admin"}} {
		for _, rt := range [][2]string{{"GET", "/v1/connections"}, {"POST", "/v1/connections"}, {"DELETE", "/v1/connections/con_x"}} {
			var body any
			if rt[0] == "POST" {
				body = map[string]any{"role": "ledger", "system": "xero"}
			}
			r := g.do(t, rt[0], rt[1], tt.token, body)
			if r.StatusCode != http.StatusForbidden || r.errorCode(t) != "insufficient_scope" {
				t.Errorf("%s %s with %s: %d %s", rt[0], rt[1], tt.why, r.StatusCode, r.body)
			}
		}
	}
	doc := string(g.do(t, "GET", "/v1/openapi.json", "", nil).body)
	for _, p := range []string{`"/v1/connections"`, `"/v1/connections/{id}"`, `"/connect/start/{token}"`, `"/connect/callback"`,
		`"connection_needs_reconnect"`, `"invalid_state"`} {
		if !strings.Contains(doc, p) {
			t.Errorf("the OpenAPI document does not name %s", p)
		}
	}
}
