package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// twoGateways runs two gateway processes on one redis-server, each with its
// own data directory, as two instances behind a load balancer would.
func twoGateways(t *testing.T) (*redistest.Server, *gateway, *gateway) {
	t.Helper()
	redis := redistest.Start(t)
	env := []string{"PRACTICEGW_REDIS=" + redis.URL(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}
	a := startGateway(t, gatewayOptions{env: env})
	b := startGateway(t, gatewayOptions{env: env})
	return redis, a, b
}

func TestTwoGatewaysActAsOne(t *testing.T) {
	_, a, b := twoGateways(t)

	// A credential issued through one instance works on the other.
	args := []string{"credential", "issue", "--json", "--firm", "frm_acme", "--name", "shared",
		"--scopes", strings.Join(allReadWrite, ","), "--rate-limit", "20/m"}
	out, err := a.cli(args...)
	if err != nil {
		t.Fatal(err)
	}
	var c issued
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, "GET", "/v1/jobs?limit=1", c.Token, nil)
	if r.StatusCode != 200 {
		t.Fatalf("instance B refuses A's credential: %d %s", r.StatusCode, r.body)
	}
	if r.Header.Get("RateLimit-Policy") != `"default";q=20;w=60` || !strings.HasPrefix(r.Header.Get("RateLimit"), `"default";r=`) {
		t.Fatalf("rate-limit headers: %q / %q", r.Header.Get("RateLimit-Policy"), r.Header.Get("RateLimit"))
	}

	// Together they admit no more than the ceiling: 20 per minute, the
	// whole minute's quota at once, one of which was just spent.
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		g := a
		if i%2 == 1 {
			g = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := g.do(t, "GET", "/v1/people?limit=1", c.Token, nil)
			switch r.StatusCode {
			case 200:
				admitted.Add(1)
			case 429:
				refused.Add(1)
				if r.errorCode(t) != "rate_limited" || r.Header.Get("Retry-After") == "" {
					t.Errorf("429 without rate_limited and Retry-After: %v %s", r.Header, r.body)
				}
			default:
				t.Errorf("status %d: %s", r.StatusCode, r.body)
			}
		}()
	}
	wg.Wait()
	// 19 left in the bucket, plus at most one more refilled during the run
	// (one every 3 s).
	if n := admitted.Load(); n < 19 || n > 20 {
		t.Fatalf("two instances admitted %d of 60 (refused %d), want 19 or 20", n, refused.Load())
	}

	// Usage per hour, admitted and refused, is shared and listed.
	out, err = b.cli("credential", "list", "--firm", "frm_acme", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []struct {
		ID      string `json:"id"`
		Traffic *struct {
			Hours []struct{ Admitted, Refused int64 } `json:"hours"`
		} `json:"traffic"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, l := range list {
		if l.ID != c.ID {
			continue
		}
		var adm, ref int64
		for _, h := range l.Traffic.Hours {
			adm, ref = adm+h.Admitted, ref+h.Refused
		}
		if adm != admitted.Load()+1 || ref != refused.Load() {
			t.Fatalf("usage %d admitted, %d refused; want %d and %d", adm, ref, admitted.Load()+1, refused.Load())
		}
		listed = true
	}
	if !listed {
		t.Fatalf("credential %s not listed", c.ID)
	}

	// An idempotent retry sent to the other instance replays the first
	// answer.
	fresh := a.issue("frm_acme", false, allReadWrite...).Token
	first := a.do(t, "POST", "/v1/clients", fresh, map[string]any{"name": "Two Instances Ltd"}, "Idempotency-Key", "shared-key")
	retry := b.do(t, "POST", "/v1/clients", fresh, map[string]any{"name": "Two Instances Ltd"}, "Idempotency-Key", "shared-key")
	if first.StatusCode != 201 || retry.StatusCode != 201 || string(retry.body) != string(first.body) || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("idempotent retry on the other instance: %d %s / %d %s", first.StatusCode, first.body, retry.StatusCode, retry.body)
	}

	// A revocation made through one instance is refused by the other
	// within a second.
	if b.do(t, "GET", "/v1/jobs?limit=1", fresh, nil).StatusCode != 200 {
		t.Fatal("fresh credential refused before revocation")
	}
	if _, err := a.cli("credential", "revoke", c.ID); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	eventually.True(t, time.Second-time.Since(revokedAt), 20*time.Millisecond, "instance B to refuse a credential revoked through A", func() bool {
		return b.do(t, "GET", "/v1/jobs?limit=1", c.Token, nil).StatusCode == 401
	})
	t.Logf("revocation reached the other instance in %s", time.Since(revokedAt).Round(time.Millisecond))

}

// TestRedisOutageUnderLoad kills Redis while two instances serve a steady
// load: no caller sees an error it could blame on the gateway, no request
// hangs, and the instances return to Redis when it is back.
func TestRedisOutageUnderLoad(t *testing.T) {
	redis, a, b := twoGateways(t)
	// A ceiling the load cannot reach: every answer should be a 200, so
	// any other status is the outage showing through.
	tok := a.issueWith("frm_acme", false, "1000000/s", allReadWrite...).Token
	b.do(t, "GET", "/v1/jobs?limit=1", tok, nil) // B learns the credential while Redis is up

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		codes   = map[int]int{}
		slowest time.Duration
		// since counts the answers to requests sent after a moment.
		since     time.Time
		sinceDone int
	)
	answeredSince := func(at time.Time) func() bool {
		mu.Lock()
		since, sinceDone = at, 0
		mu.Unlock()
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return sinceDone >= 100
		}
	}
	for w := 0; w < 4; w++ {
		g := a
		if w%2 == 1 {
			g = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				start := time.Now()
				req, _ := http.NewRequest("GET", "http://"+g.addr+"/v1/jobs?limit=5", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				took := time.Since(start)
				mu.Lock()
				if took > slowest {
					slowest = took
				}
				if !start.Before(since) {
					sinceDone++
				}
				if err != nil {
					codes[-1]++
				} else {
					codes[resp.StatusCode]++
					resp.Body.Close()
				}
				mu.Unlock()
			}
		}()
	}
	// Each phase lasts until a hundred requests sent in it are answered:
	// answers while Redis is down show that requests do not wait for it.
	eventually.True(t, 30*time.Second, poll, "answers before the outage", answeredSince(time.Now()))
	redis.Kill()
	killedAt := time.Now()
	during := answeredSince(killedAt)
	// The outage also lasts well beyond the limiter's Redis timeout, so
	// that a request waiting for Redis would show as one that outlasted it.
	eventually.True(t, 30*time.Second, poll, "answers while Redis is down", func() bool {
		return during() && time.Since(killedAt) > 1500*time.Millisecond
	})
	redis.Restart()
	outage := time.Since(killedAt)
	eventually.True(t, 30*time.Second, poll, "answers after Redis is back", answeredSince(time.Now()))
	stop.Store(true)
	wg.Wait()

	for code, n := range codes {
		if code != 200 {
			t.Errorf("%d answers with status %d", n, code)
		}
	}
	// A loaded machine makes requests slower, not as slow as the outage:
	// only one that waited for Redis takes that long.
	if slowest >= outage {
		t.Errorf("slowest request took %s, as long as the %s outage", slowest, outage.Round(time.Millisecond))
	}
	t.Logf("answers %v, slowest %s", codes, slowest.Round(time.Millisecond))

	// Back on Redis: a revocation through A reaches B again.
	c := a.issue("frm_acme", false, "jobs:read")
	if b.do(t, "GET", "/v1/jobs?limit=1", c.Token, nil).StatusCode != 200 {
		t.Fatal("B cannot use a credential issued after Redis came back")
	}
	if _, err := a.cli("credential", "revoke", c.ID); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, poll, "the revocation to reach B after Redis came back", func() bool {
		return b.do(t, "GET", "/v1/jobs?limit=1", c.Token, nil).StatusCode == 401
	})
}
