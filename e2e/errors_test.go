package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Refusals that are the caller's to act on answer with the contract's
// status and body, never 500: a replay to a disabled endpoint (enable it
// first) and a registration past the firm's endpoint ceiling.
func TestCallerMistakesAreConflictsNotServerErrors(t *testing.T) {
	g := startGateway(t, gatewayOptions{env: []string{"PRACTICEGW_WEBHOOK_MAX_ENDPOINTS=2"}})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	_, ids := webhookFixture(t, g, tok)
	ep := ids["webhook_endpoints"]
	if r := g.do(t, "PATCH", "/v1/webhook_endpoints/"+ep, tok, map[string]any{"status": "disabled"}); r.StatusCode != 200 {
		t.Fatalf("disable: %d %s", r.StatusCode, r.body)
	}
	r := g.do(t, "POST", "/v1/deliveries/"+ids["deliveries"]+"/replay", tok, nil)
	if r.StatusCode != http.StatusConflict || r.errorCode(t) != "conflict" {
		t.Fatalf("replay to a disabled endpoint: %d %s, want 409 conflict", r.StatusCode, r.body)
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	register := func() response {
		return g.do(t, "POST", "/v1/webhook_endpoints", tok, map[string]any{"url": srv.URL + "/hook", "events": []string{"job.opened"}})
	}
	if r := register(); r.StatusCode != http.StatusCreated {
		t.Fatalf("second endpoint: %d %s", r.StatusCode, r.body)
	}
	if r := register(); r.StatusCode != http.StatusConflict || r.errorCode(t) != "conflict" {
		t.Fatalf("third endpoint past a ceiling of 2: %d %s, want 409 conflict", r.StatusCode, r.body)
	}
	sandbox := g.issue("frm_acme", true, allReadWrite...).Token
	if r := g.do(t, "POST", "/v1/webhook_endpoints", sandbox, map[string]any{"url": srv.URL + "/hook", "events": []string{"job.opened"}}); r.StatusCode != http.StatusCreated {
		t.Fatalf("the sandbox has a ceiling of its own: %d %s", r.StatusCode, r.body)
	}
}

// With error routes in the Caddyfile, refusals reach them as Caddy errors
// (so handle_errors and the {http.error.*} placeholders see them) and
// still answer with the contract's body and headers; the Caddyfile without
// error routes answers exactly as before.
func TestRefusalsReachErrorRoutes(t *testing.T) {
	for _, tt := range []struct {
		name, config string
		routed       bool
	}{
		{"handle_errors", "testdata/handle_errors.Caddyfile", true},
		{"no error routes", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{config: tt.config})
			check := func(r response, status int, code string, headers ...string) {
				t.Helper()
				if r.StatusCode != status || r.errorCode(t) != code {
					t.Fatalf("%d %s, want %d %s", r.StatusCode, r.body, status, code)
				}
				if got := r.Header.Get("X-Refused"); (got == strconv.Itoa(status)) != tt.routed {
					t.Fatalf("X-Refused %q: the error route ran %v, want %v", got, got != "", tt.routed)
				}
				if r.Header.Get("Request-Id") == "" || r.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("headers %v", r.Header)
				}
				for _, h := range headers {
					if r.Header.Get(h) == "" {
						t.Fatalf("no %s header: %v", h, r.Header)
					}
				}
			}
			check(g.do(t, "GET", "/v1/jobs", "", nil), http.StatusUnauthorized, "unauthenticated", "WWW-Authenticate")
			check(g.do(t, "GET", "/v1/jobs", "pgw_live_not.a.token", nil), http.StatusUnauthorized, "unauthenticated")
			clients := g.issue("frm_acme", false, "clients:read").Token
			check(g.do(t, "GET", "/v1/jobs", clients, nil), http.StatusForbidden, "insufficient_scope")
			slow := g.issueWith("frm_acme", false, "1/h", "jobs:read").Token
			if r := g.do(t, "GET", "/v1/jobs?limit=1", slow, nil); r.StatusCode != http.StatusOK {
				t.Fatalf("first request: %d %s", r.StatusCode, r.body)
			}
			check(g.do(t, "GET", "/v1/jobs?limit=1", slow, nil), http.StatusTooManyRequests, "rate_limited", "Retry-After", "RateLimit")
		})
	}
}

// A sandbox trigger changes sandbox records, and takes effect only for a
// sandbox credential: a live one, whatever its scopes, is refused.
func TestSandboxTriggerNeedsASandboxCredential(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	live := g.issue("frm_acme", false, "webhooks:write").Token
	r := g.do(t, "POST", "/v1/sandbox/trigger", live, map[string]any{"event": "job.opened"})
	if r.StatusCode != http.StatusForbidden || r.errorCode(t) != "insufficient_scope" {
		t.Fatalf("trigger with a live credential: %d %s, want 403 insufficient_scope", r.StatusCode, r.body)
	}
	sandbox := g.issue("frm_acme", true, "webhooks:write").Token
	if r := g.do(t, "POST", "/v1/sandbox/trigger", sandbox, map[string]any{"event": "job.opened"}); r.StatusCode != http.StatusCreated {
		t.Fatalf("trigger with a sandbox credential: %d %s, want 201", r.StatusCode, r.body)
	}
}

// A cursor is good only for the firm, mode, collection and filters it was
// given for; any other use, or an edited one, is 400 invalid_cursor.
func TestCursorsAreSealed(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acme := g.issue("frm_acme", false, "jobs:read", "clients:read").Token
	page := g.do(t, "GET", "/v1/jobs?limit=2", acme, nil).json(t)
	cur, _ := page["next_cursor"].(string)
	if cur == "" {
		t.Fatalf("no next cursor: %v", page)
	}
	if r := g.do(t, "GET", "/v1/jobs?limit=2&cursor="+cur, acme, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("the cursor itself: %d %s", r.StatusCode, r.body)
	}
	birch := g.issue("frm_birch", false, "jobs:read").Token
	sandbox := g.issue("frm_acme", true, "jobs:read").Token
	edited := cur[:len(cur)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(cur, "AA")]
	for name, r := range map[string]response{
		"another firm":       g.do(t, "GET", "/v1/jobs?limit=2&cursor="+cur, birch, nil),
		"the sandbox":        g.do(t, "GET", "/v1/jobs?limit=2&cursor="+cur, sandbox, nil),
		"another collection": g.do(t, "GET", "/v1/clients?limit=2&cursor="+cur, acme, nil),
		"other filters":      g.do(t, "GET", "/v1/jobs?limit=2&stage=filed&cursor="+cur, acme, nil),
		"edited":             g.do(t, "GET", "/v1/jobs?limit=2&cursor="+edited, acme, nil),
	} {
		if r.StatusCode != http.StatusBadRequest || r.errorCode(t) != "invalid_cursor" {
			t.Errorf("%s: %d %s, want 400 invalid_cursor", name, r.StatusCode, r.body)
		}
	}
}

// Behind a load balancer that terminates TLS, a request the trusted proxy
// forwarded as https gets HSTS and Secure console cookies; the same header
// from a peer the Caddyfile does not trust changes nothing.
func TestForwardedHTTPSOnlyFromTrustedProxies(t *testing.T) {
	root, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	trusting := filepath.Join(t.TempDir(), "Caddyfile")
	// Into the root Caddyfile's own servers block: Caddy refuses a second
	// one for the same listeners.
	cfg := strings.Replace(string(root), "\tservers {\n", "\tservers {\n\t\ttrusted_proxies static 127.0.0.0/8\n", 1)
	if cfg == string(root) {
		t.Fatal("the root Caddyfile has no servers block to trust the proxy in")
	}
	if err := os.WriteFile(trusting, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, config string
		https        bool
	}{
		{"trusted proxy", trusting, true},
		{"untrusted peer", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{config: tt.config})
			r := g.do(t, "GET", "/v1/openapi.json", "", nil, "X-Forwarded-Proto", "https")
			if got := r.Header.Get("Strict-Transport-Security") != ""; got != tt.https {
				t.Errorf("HSTS on the API: %v, want %v (%v)", got, tt.https, r.Header)
			}
			page := g.do(t, "GET", "/console/sign-in", "", nil, "X-Forwarded-Proto", "https")
			cookies := page.Header.Values("Set-Cookie")
			if len(cookies) == 0 {
				t.Fatalf("the sign-in page set no cookie: %d %v", page.StatusCode, page.Header)
			}
			for _, c := range cookies {
				if got := strings.Contains(c, "; Secure"); got != tt.https {
					t.Errorf("cookie %q: Secure %v, want %v", c, got, tt.https)
				}
			}
		})
	}
}

// Sandbox triggers are bounded per firm and minute: past the ceiling the
// API answers 429 with Retry-After, and another firm is not held back.
func TestSandboxTriggersAreBounded(t *testing.T) {
	root, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "Caddyfile")
	cfg := strings.Replace(string(root), "\tpracticegw {", "\tpracticegw {\n\t\tsandbox_triggers_per_minute 2", 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{config: cfgPath})
	acme := g.issue("frm_acme", true, "webhooks:write").Token
	for i := range 2 {
		if r := g.do(t, "POST", "/v1/sandbox/trigger", acme, map[string]any{"event": "job.opened"}); r.StatusCode != http.StatusCreated {
			t.Fatalf("trigger %d: %d %s", i+1, r.StatusCode, r.body)
		}
	}
	r := g.do(t, "POST", "/v1/sandbox/trigger", acme, map[string]any{"event": "job.opened"})
	if r.StatusCode != http.StatusTooManyRequests || r.errorCode(t) != "rate_limited" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("third trigger in a minute: %d %s %v, want 429 rate_limited with Retry-After", r.StatusCode, r.body, r.Header)
	}
	birch := g.issue("frm_birch", true, "webhooks:write").Token
	if r := g.do(t, "POST", "/v1/sandbox/trigger", birch, map[string]any{"event": "job.opened"}); r.StatusCode != http.StatusCreated {
		t.Fatalf("another firm: %d %s", r.StatusCode, r.body)
	}
}
