package e2e

import (
	"fmt"
	"testing"
	"time"
)

// Every record carries a version that each change raises; an event's
// object carries the version of the state it reports, the one the API
// then answers, so a receiver can drop an older state that arrives late.
func TestRecordVersionsOrderEvents(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "client.updated")
	rc.setSecrets(secret)

	client := g.do(t, "GET", "/v1/clients?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)
	path := "/v1/clients/" + client["id"].(string)
	start := client["version"].(float64)
	if start < 1 {
		t.Fatalf("a seeded client's version is %v, want at least 1", client["version"])
	}
	var answered []float64
	for i := range 2 {
		r := g.do(t, "PATCH", path, tok, map[string]any{"phone": fmt.Sprintf("+44 20 7946 010%d", i)})
		if r.StatusCode != 200 {
			t.Fatalf("PATCH %s: %d %s", path, r.StatusCode, r.body)
		}
		answered = append(answered, r.json(t)["version"].(float64))
	}
	if answered[0] != start+1 || answered[1] != start+2 {
		t.Fatalf("versions answered %v after %v, want each change to raise it by one", answered, start)
	}
	if got := g.do(t, "GET", path, tok, nil).json(t)["version"].(float64); got != answered[1] {
		t.Fatalf("GET answers version %v, the last write answered %v", got, answered[1])
	}
	got := rc.wait(2, 10*time.Second)
	seen := map[float64]bool{}
	for _, d := range got {
		object := d.envelope["data"].(map[string]any)["object"].(map[string]any)
		seen[object["version"].(float64)] = true
	}
	if !seen[answered[0]] || !seen[answered[1]] || len(seen) != 2 {
		t.Fatalf("events carry versions %v, want the two the API answered %v", seen, answered)
	}
}
