package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

type operation struct {
	id, method, pattern, path, scope string
	body                             any
	success                          string
	responses                        map[string]any
	// connects is a connection route, which the root Caddyfile (no
	// connect block) answers with one of its documented refusals; the
	// connection tests walk them on a gateway that offers connections.
	connects bool
}

// exampleBodies gives each documented write a valid body; a new write
// route fails the test until it has one here.
func exampleBodies(t *testing.T, g *gateway, token, receiver string) map[string]any {
	client := g.do(t, "GET", "/v1/clients?limit=1", token, nil).json(t)["data"].([]any)[0].(map[string]any)["id"]
	return map[string]any{
		"create_client":            map[string]any{"name": "OpenAPI Example Ltd"},
		"update_client":            map[string]any{"status": "active"},
		"create_job":               map[string]any{"title": "OpenAPI example job", "client": client},
		"update_job":               map[string]any{"title": "Renamed by the OpenAPI test"},
		"move_job":                 map[string]any{"stage": "in_progress", "note": "Started"},
		"create_webhook_endpoint":  map[string]any{"url": receiver, "events": []string{"job.opened"}},
		"update_webhook_endpoint":  map[string]any{"description": "Renamed by the OpenAPI test"},
		"replay_failed_deliveries": map[string]any{"since": "2026-01-01T00:00:00Z"},
		"trigger_sandbox_event":    map[string]any{"event": "job.opened"},
		"create_connection":        map[string]any{"role": "ledger", "system": "xero"},
		"update_connection":        map[string]any{"tenant_id": "org_1"},
	}
}

// webhookFixture registers an endpoint on a receiver, raises a live event
// and waits for its delivery, so that event and delivery routes have real
// ids to work on.
func webhookFixture(t *testing.T, g *gateway, token string) (receiver string, ids map[string]string) {
	t.Helper()
	rc := newReceiver(t)
	ep := g.do(t, "POST", "/v1/webhook_endpoints", token, map[string]any{"url": rc.url(), "events": []string{"job.stage_changed"}})
	if ep.StatusCode != 201 {
		t.Fatalf("register endpoint: %d %s", ep.StatusCode, ep.body)
	}
	epID := ep.json(t)["id"].(string)
	job := g.do(t, "GET", "/v1/jobs?limit=1", token, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	if r := g.do(t, "POST", "/v1/jobs/"+job+"/stage", token, map[string]any{"stage": "in_review"}); r.StatusCode != 200 {
		t.Fatalf("move job: %d %s", r.StatusCode, r.body)
	}
	var fixture map[string]string
	eventually.True(t, 10*time.Second, 50*time.Millisecond, "a delivery for the fixture event", func() bool {
		page := g.do(t, "GET", "/v1/webhook_endpoints/"+epID+"/deliveries", token, nil).json(t)
		if data := page["data"].([]any); len(data) > 0 {
			d := data[0].(map[string]any)
			fixture = map[string]string{"webhook_endpoints": epID, "deliveries": d["id"].(string), "events": d["event_id"].(string)}
			return true
		}
		return false
	})
	return rc.url(), fixture
}

// documentedOperations reads the served OpenAPI document and makes each
// operation concrete: a real id in the path and an example body.
func documentedOperations(t *testing.T, g *gateway) []operation {
	t.Helper()
	full := g.issue("frm_acme", false, allReadWrite...).Token
	r := g.do(t, "GET", "/v1/openapi.json", "", nil)
	if r.StatusCode != 200 {
		t.Fatalf("openapi.json: %d", r.StatusCode)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	receiver, ids := webhookFixture(t, g, full)
	bodies := exampleBodies(t, g, full, receiver)
	var ops []operation
	for pattern, methods := range doc.Paths {
		for method, raw := range methods {
			op := operation{id: raw["operationId"].(string), method: strings.ToUpper(method), pattern: pattern, path: pattern,
				responses: raw["responses"].(map[string]any)}
			tags, _ := raw["tags"].([]any)
			op.connects = len(tags) > 0 && tags[0] == "connections"
			if sec, ok := raw["security"].([]any); ok && len(sec) > 0 {
				op.scope = sec[0].(map[string]any)["bearer"].([]any)[0].(string)
			}
			if op.connects {
				op.path = strings.NewReplacer("{id}", "con_unknown", "{connection}", "con_unknown").Replace(pattern)
			} else if strings.Contains(pattern, "{id}") {
				kind := strings.Split(pattern, "/")[2]
				if op.id == "delete_webhook_endpoint" {
					// Deleting the shared fixture would break the routes after it.
					spare := g.do(t, "POST", "/v1/webhook_endpoints", full, bodies["create_webhook_endpoint"])
					op.path = strings.Replace(pattern, "{id}", spare.json(t)["id"].(string), 1)
				} else if ids[kind] == "" {
					ids[kind] = g.do(t, "GET", "/v1/"+kind+"?limit=1", full, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)
				}
				if op.path == pattern {
					op.path = strings.Replace(pattern, "{id}", ids[kind], 1)
				}
			}
			if _, ok := raw["requestBody"]; ok {
				b, ok := bodies[op.id]
				if !ok {
					t.Fatalf("no example body for %s", op.id)
				}
				op.body = b
			}
			for code := range op.responses {
				if strings.HasPrefix(code, "2") {
					op.success = code
				}
			}
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].pattern+ops[i].method < ops[j].pattern+ops[j].method })
	return ops
}

// TestOpenAPIMatchesRoutes calls every documented operation and checks the
// answer against the document, and checks that the server serves nothing
// on those paths that the document leaves out.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	full := g.issue("frm_acme", false, allReadWrite...).Token
	// Sandbox routes take sandbox credentials only.
	sandboxFull := g.issue("frm_acme", true, allReadWrite...).Token
	tokenFor := func(op operation) string {
		if strings.HasPrefix(op.pattern, "/v1/sandbox/") {
			return sandboxFull
		}
		return full
	}
	schemas, err := compileDocument(g.do(t, "GET", "/v1/openapi.json", "", nil).body)
	if err != nil {
		t.Fatal(err)
	}

	documented := map[string]bool{}
	for _, op := range documentedOperations(t, g) {
		documented[op.pattern+" "+op.method] = true
		if op.streams() {
			// A stream lasts: its answer is checked as it starts.
			checkStreamStarts(t, g, op.path, sandboxFull)
			continue
		}
		r := g.do(t, op.method, op.path, tokenFor(op), op.body)
		code := fmt.Sprint(r.StatusCode)
		if _, ok := op.responses[code]; !ok {
			t.Errorf("%s %s answered %s, which the document does not list: %s", op.method, op.path, code, r.body)
			continue
		}
		if op.connects {
			continue
		}
		if code != op.success {
			t.Errorf("%s %s answered %s, want %s: %s", op.method, op.path, code, op.success, r.body)
			continue
		}
		schema, err := schemas.at("paths", op.pattern, strings.ToLower(op.method), "responses", code, "content", "application/json", "schema")
		if err != nil {
			t.Fatalf("%s %s: %v", op.method, op.pattern, err)
		}
		body, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
		if err != nil {
			t.Fatalf("%s %s: %v", op.method, op.path, err)
		}
		if err := schema.Validate(body); err != nil {
			t.Errorf("%s %s: answer does not match the document: %v", op.method, op.path, err)
		}
	}
	// Methods the document does not list for a path are not served.
	for _, op := range documentedOperations(t, g) {
		for _, m := range []string{"GET", "POST", "PATCH", "PUT", "DELETE"} {
			if documented[op.pattern+" "+m] {
				continue
			}
			if r := g.do(t, m, op.path, full, op.body); r.StatusCode != 405 {
				t.Errorf("%s %s is not documented but answered %d", m, op.path, r.StatusCode)
			}
		}
	}
}

// streams reports whether the operation answers with Server-Sent Events.
func (op operation) streams() bool {
	ok, _ := op.responses[op.success].(map[string]any)
	content, _ := ok["content"].(map[string]any)
	_, sse := content["text/event-stream"]
	return sse
}

// checkStreamStarts opens an event stream and checks that it answers 200
// with text/event-stream and its opening message, then closes it.
func checkStreamStarts(t *testing.T, g *gateway, path, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+g.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || err != nil || !strings.HasPrefix(line, "id: ") {
		t.Errorf("GET %s: %d %s, first line %q (%v)", path, resp.StatusCode, resp.Header.Get("Content-Type"), line, err)
	}
}
