package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// TestScaleOutOverRedisTLS runs two gateways and a dispatcher against a
// redis-server that serves TLS alone (no plain-text port), with a
// certificate from a private authority, and asks clients for theirs.
// Every use of Redis goes through it and is seen to be shared: a
// revocation, an idempotent replay and a credential listing across
// instances; the rate limiter's buckets (exact across instances, which the
// in-process fallback would not be); the budget that bounds sandbox
// triggers; and webhook endpoints, events and deliveries, which the
// dispatcher reads and writes.
func TestScaleOutOverRedisTLS(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "practicegw.changes", "practicegw.events"),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	redis := redistest.Start(t, redistest.WithTLS())
	files := redis.TLS()
	if !strings.HasPrefix(redis.URL(), "rediss://") {
		t.Fatalf("redis URL %s", redis.URL())
	}
	shared := []string{
		"PRACTICEGW_REDIS=" + redis.URL(),
		"PRACTICEGW_SECRETS_KEY=" + secretsKey(),
		"PRACTICEGW_REDIS_TLS_CA=" + files.CA,
		"PRACTICEGW_REDIS_TLS_CERT=" + files.ClientCert,
		"PRACTICEGW_REDIS_TLS_KEY=" + files.ClientKey,
		"PRACTICEGW_KAFKA=" + strings.Join(cluster.ListenAddrs(), ","),
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8",
	}
	root, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "Caddyfile")
	bounded := strings.Replace(string(root), "\tpracticegw {", "\tpracticegw {\n\t\tsandbox_triggers_per_minute 2", 1)
	// What is checked here is that both instances share buckets over TLS,
	// not the limiter's timeout: with its default 50 ms a TLS round trip on
	// a loaded machine hands decisions to the in-process fallback, and two
	// instances then admit five each.
	bounded = strings.Replace(bounded, "\t\tpracticegw_ratelimit\n", "\t\tpracticegw_ratelimit {\n\t\t\ttimeout 2s\n\t\t}\n", 1)
	if !strings.Contains(bounded, "timeout 2s") {
		t.Fatal("the root Caddyfile no longer has a bare practicegw_ratelimit line to give a timeout")
	}
	if err := os.WriteFile(config, []byte(bounded), 0o644); err != nil {
		t.Fatal(err)
	}
	gwEnv := append([]string{"PRACTICEGW_DISPATCH=off"}, shared...)
	a := startGateway(t, gatewayOptions{config: config, env: gwEnv})
	b := startGateway(t, gatewayOptions{config: config, env: gwEnv})
	startDispatcher(t, append(append(os.Environ(), shared...), "PRACTICEGW_KAFKA_PARTITIONS=2"))

	// Rate limits: 5 a minute between both instances. Each instance's
	// limiter first opens its TLS connection to Redis with a request of
	// another credential: a handshake slower than the limiter's timeout
	// (50 ms, on a loaded machine) would hand the first decisions to the
	// in-process fallback, which is a different test.
	warm := a.issue("frm_acme", false, "jobs:read").Token
	for _, g := range []*gateway{a, b} {
		if r := g.do(t, "GET", "/v1/jobs?limit=1", warm, nil); r.StatusCode != http.StatusOK {
			t.Fatalf("warm-up: %d %s", r.StatusCode, r.body)
		}
	}
	limited := a.issueWith("frm_acme", false, "5/m", "jobs:read")
	admitted := 0
	for i := range 8 {
		g := []*gateway{a, b}[i%2]
		switch r := g.do(t, "GET", "/v1/jobs?limit=1", limited.Token, nil); r.StatusCode {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("request %d: %d %s", i, r.StatusCode, r.body)
		}
	}
	// One more may have been refilled (one every 12 s) during the run.
	if admitted < 5 || admitted > 6 {
		t.Errorf("two instances admitted %d of 8 at 5/m; want 5 (their buckets are not shared)", admitted)
	}

	// Credentials: listed by the other instance; an idempotent retry sent
	// to it replays; a revocation reaches it within a second.
	tok := a.issue("frm_acme", false, allReadWrite...)
	out, err := b.cli("credential", "list", "--firm", "frm_acme", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, tok.ID) {
		t.Errorf("instance B does not list %s issued through A: %s", tok.ID, out)
	}
	first := a.do(t, "POST", "/v1/clients", tok.Token, map[string]any{"name": "Over TLS Ltd"}, "Idempotency-Key", "tls-key")
	retry := b.do(t, "POST", "/v1/clients", tok.Token, map[string]any{"name": "Over TLS Ltd"}, "Idempotency-Key", "tls-key")
	if first.StatusCode != 201 || retry.Header.Get("Idempotent-Replayed") != "true" || string(retry.body) != string(first.body) {
		t.Errorf("idempotent retry on the other instance: %d / %d %s", first.StatusCode, retry.StatusCode, retry.body)
	}
	if _, err := a.cli("credential", "revoke", limited.ID); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, time.Second, poll, "instance B to refuse a credential revoked through A", func() bool {
		return b.do(t, "GET", "/v1/jobs?limit=1", limited.Token, nil).StatusCode == http.StatusUnauthorized
	})

	// Sandbox triggers: 2 a minute for the firm, across instances; each is
	// delivered by the dispatcher to the endpoint registered through A.
	sandbox := a.issue("frm_acme", true, "webhooks:read", "webhooks:write", "events:read")
	rc := newReceiver(t)
	_, secret := register(t, a, sandbox.Token, rc.url(), "job.opened")
	rc.setSecrets(secret)
	var ids []string
	for i, g := range []*gateway{a, b} {
		r := g.do(t, "POST", "/v1/sandbox/trigger", sandbox.Token, map[string]any{"event": "job.opened"})
		if r.StatusCode != http.StatusCreated {
			t.Fatalf("trigger %d: %d %s", i+1, r.StatusCode, r.body)
		}
		ids = append(ids, r.json(t)["event_id"].(string))
	}
	if r := a.do(t, "POST", "/v1/sandbox/trigger", sandbox.Token, map[string]any{"event": "job.opened"}); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third trigger in a minute across two instances: %d %s, want 429", r.StatusCode, r.body)
	}
	got := rc.wait(2, 20*time.Second)
	for _, id := range ids {
		found := false
		for _, d := range got {
			found = found || d.id == id
		}
		if !found {
			t.Errorf("event %s was not delivered (got %d deliveries)", id, len(got))
		}
		if r := b.do(t, "GET", "/v1/events/"+id, sandbox.Token, nil); r.StatusCode != http.StatusOK {
			t.Errorf("GET /v1/events/%s on B: %d %s", id, r.StatusCode, r.body)
		}
	}
}
