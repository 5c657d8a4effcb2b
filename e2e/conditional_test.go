package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// Polling with ETags: every read carries one; sending it back answers 304
// with no body and leaves the credential's quota where it was; a change to
// the record gives a new ETag and a 200.
func TestConditionalReadsCostNothing(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issueWith("frm_acme", false, "100/h", allReadWrite...).Token
	for _, path := range []string{"/v1/clients?limit=5&updated_since=2020-01-01T00:00:00Z", "/v1/events?limit=5", "/v1/jobs?limit=3"} {
		first := g.do(t, "GET", path, tok, nil)
		tag := first.Header.Get("ETag")
		if first.StatusCode != 200 || !strings.HasPrefix(tag, `"`) {
			t.Fatalf("GET %s: %d with ETag %q", path, first.StatusCode, tag)
		}
		remaining := first.Header.Get("RateLimit")
		for range 3 {
			again := g.do(t, "GET", path, tok, nil, "If-None-Match", tag)
			if again.StatusCode != http.StatusNotModified || len(again.body) != 0 {
				t.Fatalf("GET %s with its ETag: %d %q, want 304 and no body", path, again.StatusCode, again.body)
			}
			if got := again.Header.Get("RateLimit"); got != remaining {
				t.Fatalf("GET %s answered 304 with RateLimit %q, want %q unchanged", path, got, remaining)
			}
			if again.Header.Get("ETag") != tag {
				t.Fatalf("304 carries ETag %q, want %q", again.Header.Get("ETag"), tag)
			}
		}
	}

	client := g.do(t, "GET", "/v1/clients?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)
	path := "/v1/clients/" + client["id"].(string)
	before := g.do(t, "GET", path, tok, nil)
	tag := before.Header.Get("ETag")
	if r := g.do(t, "PATCH", path, tok, map[string]any{"name": "Renamed for the ETag test"}); r.StatusCode != 200 {
		t.Fatalf("PATCH %s: %d %s", path, r.StatusCode, r.body)
	}
	after := g.do(t, "GET", path, tok, nil, "If-None-Match", tag)
	if after.StatusCode != 200 || after.Header.Get("ETag") == tag {
		t.Fatalf("GET %s after a change, with the old ETag: %d, ETag %q", path, after.StatusCode, after.Header.Get("ETag"))
	}
	if got := g.do(t, "GET", path, tok, nil, "If-None-Match", `W/"x", `+after.Header.Get("ETag")).StatusCode; got != http.StatusNotModified {
		t.Fatalf("If-None-Match listing the current ETag among others: %d, want 304", got)
	}
}
