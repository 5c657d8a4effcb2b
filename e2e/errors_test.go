package e2e

import (
	"strings"
	"testing"
)

func TestErrorCodes(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	full := g.issue("frm_acme", false, allReadWrite...)
	tok := full.Token
	jobs := g.do(t, "GET", "/v1/jobs?limit=2", tok, nil).json(t)
	jobID := jobs["data"].([]any)[0].(map[string]any)["id"].(string)
	cursor := jobs["next_cursor"].(string)
	jsonHeaders := []string{}

	cases := []struct {
		name         string
		method, path string
		token        string
		body         any
		headers      []string
		status       int
		code         string
		param        string
	}{
		{"limit too low", "GET", "/v1/jobs?limit=0", tok, nil, nil, 400, "parameter_invalid", "limit"},
		{"limit too high", "GET", "/v1/jobs?limit=201", tok, nil, nil, 400, "parameter_invalid", "limit"},
		{"limit not a number", "GET", "/v1/jobs?limit=ten", tok, nil, nil, 400, "parameter_invalid", "limit"},
		{"unknown stage filter", "GET", "/v1/jobs?stage=archived", tok, nil, nil, 400, "parameter_invalid", "stage"},
		{"bad date", "GET", "/v1/jobs?deadline_after=31/01/2026", tok, nil, nil, 400, "parameter_invalid", "deadline_after"},
		{"bad time", "GET", "/v1/clients?updated_since=yesterday", tok, nil, nil, 400, "parameter_invalid", "updated_since"},
		{"repeated parameter", "GET", "/v1/jobs?stage=filed&stage=planned", tok, nil, nil, 400, "parameter_invalid", "stage"},
		{"unknown parameter", "GET", "/v1/jobs?colour=blue", tok, nil, nil, 400, "parameter_unknown", "colour"},
		{"filter of another collection", "GET", "/v1/clients?stage=filed", tok, nil, nil, 400, "parameter_unknown", "stage"},
		{"query on single read", "GET", "/v1/jobs/" + jobID + "?expand=client", tok, nil, nil, 400, "parameter_unknown", "expand"},
		{"missing name", "POST", "/v1/clients", tok, map[string]any{"type": "company"}, nil, 400, "parameter_missing", "name"},
		{"missing stage", "POST", "/v1/jobs/" + jobID + "/stage", tok, map[string]any{"note": "x"}, nil, 400, "parameter_missing", "stage"},
		{"unknown body field", "POST", "/v1/clients", tok, map[string]any{"name": "X", "colour": "blue"}, nil, 400, "parameter_unknown", "colour"},
		{"wrong field type", "POST", "/v1/clients", tok, map[string]any{"name": 7}, nil, 400, "parameter_invalid", "name"},
		{"unknown owner", "POST", "/v1/clients", tok, map[string]any{"name": "X", "owner": "usr_nobody"}, nil, 400, "parameter_invalid", "owner"},
		{"garbage cursor", "GET", "/v1/jobs?cursor=cur_garbage", tok, nil, nil, 400, "invalid_cursor", "cursor"},
		{"cursor without prefix", "GET", "/v1/jobs?cursor=abc", tok, nil, nil, 400, "invalid_cursor", "cursor"},
		{"cursor of other filters", "GET", "/v1/jobs?stage=filed&cursor=" + cursor, tok, nil, nil, 400, "invalid_cursor", "cursor"},
		{"cursor of other collection", "GET", "/v1/clients?cursor=" + cursor, tok, nil, nil, 400, "invalid_cursor", "cursor"},
		{"broken JSON", "POST", "/v1/clients", tok, `{"name":`, nil, 400, "invalid_json", ""},
		{"empty body", "POST", "/v1/clients", tok, "", nil, 400, "invalid_json", ""},
		{"JSON array", "POST", "/v1/clients", tok, `[]`, nil, 400, "invalid_json", ""},
		{"no token", "GET", "/v1/jobs", "", nil, nil, 401, "unauthenticated", ""},
		{"malformed token", "GET", "/v1/jobs", "pgw_live_nonsense", nil, nil, 401, "unauthenticated", ""},
		{"forged token", "GET", "/v1/jobs", forge(tok), nil, nil, 401, "unauthenticated", ""},
		{"live token passed as sandbox", "GET", "/v1/jobs", "pgw_test_" + strings.TrimPrefix(tok, "pgw_live_"), nil, nil, 401, "unauthenticated", ""},
		{"unknown id", "GET", "/v1/jobs/job_00000000000000000000000000", tok, nil, nil, 404, "resource_not_found", "id"},
		{"id of another kind", "GET", "/v1/jobs/cli_00000000000000000000000000", tok, nil, nil, 404, "resource_not_found", "id"},
		{"unknown collection", "GET", "/v1/widgets", tok, nil, nil, 404, "resource_not_found", ""},
		{"unknown version", "GET", "/v2/jobs", tok, nil, nil, 404, "unknown_api_version", ""},
		{"unknown version without token", "GET", "/v0/clients", "", nil, nil, 404, "unknown_api_version", ""},
		{"write to engagements", "POST", "/v1/engagements", tok, map[string]any{}, nil, 405, "method_not_allowed", ""},
		{"delete a job", "DELETE", "/v1/jobs/" + jobID, tok, nil, nil, 405, "method_not_allowed", ""},
		{"patch an invoice", "PATCH", "/v1/invoices/inv_x", tok, map[string]any{}, nil, 405, "method_not_allowed", ""},
		{"payload too large", "POST", "/v1/clients", tok, `{"name":"` + strings.Repeat("x", 2<<20) + `"}`, nil, 413, "payload_too_large", ""},
		{"wrong content type", "POST", "/v1/clients", tok, `name=x`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		{"unknown stage", "POST", "/v1/jobs/" + jobID + "/stage", tok, map[string]any{"stage": "done"}, nil, 422, "invalid_stage", "stage"},
	}
	_ = jsonHeaders
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := g.do(t, c.method, c.path, c.token, c.body, c.headers...)
			if r.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", r.StatusCode, c.status, r.body)
			}
			e := r.json(t)["error"].(map[string]any)
			if e["code"] != c.code {
				t.Fatalf("code %v, want %s: %s", e["code"], c.code, r.body)
			}
			if msg, _ := e["message"].(string); len(msg) < 10 || !strings.HasSuffix(msg, ".") {
				t.Errorf("message %q is not a human sentence", msg)
			}
			if c.param != "" && e["param"] != c.param {
				t.Errorf("param %v, want %s", e["param"], c.param)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if r.StatusCode == 405 && r.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if r.StatusCode == 401 && r.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	if r := g.do(t, "POST", "/v1/engagements", tok, map[string]any{}); !strings.Contains(r.json(t)["error"].(map[string]any)["message"].(string), "engagement-letter") {
		t.Errorf("engagement write message: %s", r.body)
	}
	if r := g.do(t, "POST", "/v1/engagements", tok, map[string]any{}); r.Header.Get("Allow") != "GET" {
		t.Errorf("engagement Allow: %q", r.Header.Get("Allow"))
	}

	// A revoked credential is refused at once.
	if _, err := g.cli("credential", "revoke", full.ID); err != nil {
		t.Fatal(err)
	}
	if r := g.do(t, "GET", "/v1/jobs", tok, nil); r.StatusCode != 401 || r.errorCode(t) != "unauthenticated" {
		t.Fatalf("revoked credential: %d %s", r.StatusCode, r.body)
	}
}

// forge re-signs nothing: it swaps the payload of a real token for one
// naming another firm, which the signature no longer covers.
func forge(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return token
	}
	parts[1] = "eyJmaXJtIjoiZnJtX2JpcmNoIiwiaXNzIjoicHJhY3RpY2VndyIsInN1YiI6ImNyZF94In0"
	return strings.Join(parts, ".")
}

func TestFirmAndSandboxIsolation(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acme := g.issue("frm_acme", false, allReadWrite...).Token
	birch := g.issue("frm_birch", false, allReadWrite...).Token
	sandbox := g.issue("frm_acme", true, allReadWrite...)
	if !strings.HasPrefix(sandbox.Token, "pgw_test_") || !strings.HasPrefix(acme, "pgw_live_") {
		t.Fatalf("token prefixes: %q %q", sandbox.Token[:9], acme[:9])
	}
	for _, kind := range []string{"clients", "jobs", "engagements", "documents", "invoices", "people"} {
		acmeID := g.do(t, "GET", "/v1/"+kind+"?limit=1", acme, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)
		for name, tok := range map[string]string{"other firm": birch, "sandbox": sandbox.Token} {
			r := g.do(t, "GET", "/v1/"+kind+"/"+acmeID, tok, nil)
			if r.StatusCode != 404 || r.errorCode(t) != "resource_not_found" {
				t.Errorf("%s reading %s: %d %s", name, acmeID, r.StatusCode, r.body)
			}
		}
	}
	// Writes cannot reach another firm's records either.
	acmeJob := g.do(t, "GET", "/v1/jobs?limit=1", acme, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	if r := g.do(t, "POST", "/v1/jobs/"+acmeJob+"/stage", birch, map[string]any{"stage": "filed"}); r.StatusCode != 404 {
		t.Errorf("other firm moving a job: %d %s", r.StatusCode, r.body)
	}
	// Sandbox writes stay in the sandbox.
	r := g.do(t, "POST", "/v1/clients", sandbox.Token, map[string]any{"name": "Sandbox Only Ltd"})
	if r.StatusCode != 201 {
		t.Fatalf("sandbox create: %d %s", r.StatusCode, r.body)
	}
	if r := g.do(t, "GET", "/v1/clients/"+r.json(t)["id"].(string), acme, nil); r.StatusCode != 404 {
		t.Errorf("live credential sees a sandbox client: %d", r.StatusCode)
	}
}

func TestScopeMatrix(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	scopes := []string{"clients:read", "clients:write", "engagements:read", "documents:read", "invoices:read",
		"people:read", "jobs:read", "jobs:write", "events:read", "webhooks:read", "webhooks:write", "admin"}
	tokens := map[string]string{}
	for _, s := range scopes {
		tokens[s] = g.issue("frm_acme", false, s).Token
	}
	ops := documentedOperations(t, g)
	for _, op := range ops {
		if op.scope == "" {
			continue
		}
		for _, s := range scopes {
			r := g.do(t, op.method, op.path, tokens[s], op.body)
			denied := r.StatusCode == 403
			if denied != (s != op.scope) {
				t.Errorf("%s %s with %s: %d %s", op.method, op.path, s, r.StatusCode, r.body)
			}
			if denied && r.errorCode(t) != "insufficient_scope" {
				t.Errorf("%s %s with %s: code %s", op.method, op.path, s, r.errorCode(t))
			}
		}
	}
}
