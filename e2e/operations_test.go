package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// TestReloadKeepsServing reloads the configuration (adding a firm) under a
// steady load of reads and writes: no request fails, and every write's
// webhook is still delivered.
func TestReloadKeepsServing(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issueWith("frm_acme", false, "1000000/s", allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "job.opened")
	rc.setSecrets(secret)
	client := g.do(t, "GET", "/v1/clients?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)

	base, err := os.ReadFile(defaultCaddyfile())
	if err != nil {
		t.Fatal(err)
	}
	variant := strings.Replace(string(base), "\t\tfirm frm_birch {",
		"\t\tfirm frm_cedar {\n\t\t\tname \"Cedar Partners\"\n\t\t\trecords demo\n\t\t}\n\t\tfirm frm_birch {", 1)
	if variant == string(base) {
		t.Fatal("could not add a firm to the Caddyfile")
	}
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(variant), 0o644); err != nil {
		t.Fatal(err)
	}

	var (
		stop             atomic.Bool
		wg               sync.WaitGroup
		writes, failures atomic.Int64
		answered         atomic.Int64
		mu               sync.Mutex
		firstFailure     string
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				// Writes carry an Idempotency-Key, as clients should: a
				// keep-alive connection the old configuration closes can
				// race a request, and the key is what lets the HTTP client
				// (Go's, like most) resend it safely.
				var req *http.Request
				if w == 0 && i%2 == 0 {
					body := fmt.Sprintf(`{"title":"Reload %d","client":%q}`, i, client)
					req, _ = http.NewRequest("POST", "http://"+g.addr+"/v1/jobs", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", fmt.Sprintf("reload-%d", i))
				} else {
					req, _ = http.NewRequest("GET", "http://"+g.addr+"/v1/jobs?limit=20", nil)
				}
				req.Header.Set("Authorization", "Bearer "+tok)
				status, detail := send(req)
				answered.Add(1)
				if status == 201 {
					writes.Add(1)
				}
				if status >= 300 || status == 0 {
					failures.Add(1)
					mu.Lock()
					if firstFailure == "" {
						firstFailure = fmt.Sprintf("%s %s: %d %s", req.Method, req.URL.Path, status, detail)
					}
					mu.Unlock()
				}
			}
		}()
	}
	// Traffic flows before the reload and goes on flowing after it: the
	// old configuration's connections are drained under load and the new
	// one takes over without a failed request.
	const requestsEach = 200
	eventually.True(t, 30*time.Second, poll, "traffic before the reload", func() bool { return answered.Load() >= requestsEach })
	if out, err := g.cli("reload", "--config", path, "--adapter", "caddyfile", "--address", g.admin); err != nil {
		t.Fatalf("reload: %v %s", err, out)
	}
	after := answered.Load() + requestsEach
	eventually.True(t, 30*time.Second, poll, "traffic after the reload", func() bool { return answered.Load() >= after })
	stop.Store(true)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d requests failed across the reload; first: %s", failures.Load(), firstFailure)
	}

	// The new firm is served after the reload.
	cedar := g.issue("frm_cedar", false, "clients:read")
	if r := g.do(t, "GET", "/v1/clients?limit=1", cedar.Token, nil); r.StatusCode != 200 {
		t.Fatalf("new firm after reload: %d %s", r.StatusCode, r.body)
	}
	// Every write made across the reload raised its event and was delivered.
	rc.wait(int(writes.Load()), 10*time.Second)
}

// send makes a request and returns its status and body, or status 0 and
// the transport error.
func send(req *http.Request) (int, string) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
