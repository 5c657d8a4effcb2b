package e2e

import (
	"net/http"
	"net/http/httptest"
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
