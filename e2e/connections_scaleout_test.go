package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// connectFirm is a firm with only a name, on a gateway whose connect
// block registers the Xero and Karbon doubles' apps: what the firm's
// administrator connects lives in the store alone.
type connectFirm struct {
	k      *vendortest.Karbon
	x      *vendortest.Xero
	config string
	env    []string
}

// startConnectFirm fills the doubles as startVendors does and writes the
// Caddyfile, whose public_url is publicAddr (host:port of the gateway the
// vendors send the administrator back to), with the root Caddyfile's
// access log.
func startConnectFirm(t *testing.T, publicAddr string) *connectFirm {
	t.Helper()
	v := startVendors(t, vendorOptions{})
	v.x.Identity.AllowRedirect("http://" + publicAddr + "/connect/callback")
	caddyfile := fmt.Sprintf(`{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}
		connect {
			public_url http://%s
			xero {
				client_id {env.TEST_XERO_CLIENT_ID}
				client_secret {env.TEST_XERO_CLIENT_SECRET}
				authorize_url %s
				token_url %s
				revoke_url %s
				connections_url %s
				base_url %s
			}
			karbon {
				bearer {env.TEST_KARBON_BEARER}
				base_url %s
			}
		}
		firm frm_hollis {
			name "Hollis & Vane LLP"
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
%s
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	@vendor_webhooks path /ingest/* /connect/webhooks/*
	handle @vendor_webhooks {
		practicegw_ingest
	}
	handle /v1/openapi.json {
		practicegw_api
	}
	handle /v1/* {
		practicegw_auth
		practicegw_ratelimit
		practicegw_api
	}
	handle {
		practicegw_api
	}
}
`, publicAddr, v.x.Identity.AuthorizeURL(), v.x.Identity.TokenURL(), v.x.Identity.RevokeURL(), v.x.ConnectionsURL(), v.x.Identity.URL, v.k.URL,
		rootAccessLog(t))
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return &connectFirm{k: v.k, x: v.x, config: path, env: []string{
		"TEST_XERO_CLIENT_ID=" + v.x.Identity.ClientID, "TEST_XERO_CLIENT_SECRET=" + v.x.Identity.ClientSecret,
		"TEST_KARBON_BEARER=" + v.k.Bearer,
	}}
}

// gateway starts a gateway on the firm's Caddyfile at addr ("" for any
// free port), with env added.
func (f *connectFirm) gateway(t *testing.T, addr string, env ...string) *gateway {
	t.Helper()
	return startGateway(t, gatewayOptions{config: f.config, addr: addr, env: append(append([]string(nil), f.env...), env...)})
}

// seen keeps every answer body a test received, to look for secrets in.
type seen struct {
	mu     sync.Mutex
	bodies []string
}

func (s *seen) keep(r response) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, withoutConsentPage(r.body))
	return r
}

// withoutConsentPage is an answer without its authorize_url, the one
// place the consent's start link is meant to be: the administrator's
// browser opens it.
func withoutConsentPage(body []byte) string {
	var c map[string]any
	if json.Unmarshal(body, &c) != nil || c["authorize_url"] == nil {
		return string(body)
	}
	return strings.ReplaceAll(string(body), c["authorize_url"].(string), "")
}

func (s *seen) text(more ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(append(slices.Clone(s.bodies), more...), "\n")
}

// connectionOf decodes a connection object, failing t unless the answer
// is 2xx.
func connectionOf(t *testing.T, r response) map[string]any {
	t.Helper()
	if r.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", r.Request.Method, r.Request.URL.Path, r.StatusCode, r.body)
	}
	return r.json(t)
}

// stable is what a refused consent must leave as it was: the stored
// connection, without what this instance observes of its sync.
func stable(t *testing.T, c map[string]any) string {
	t.Helper()
	c = maps.Clone(c)
	delete(c, "sync")
	delete(c, "last_success_at")
	delete(c, "authorize_url")
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// callback sends the query of the vendor's redirect to g's callback, as
// the browser br would were it sent there.
func callback(t *testing.T, g *gateway, rec *seen, br *consentBrowser, redirect *url.URL) response {
	t.Helper()
	return rec.keep(br.callback(t, g, redirect))
}

// racedCallbacks sends the redirect's query to each gateway's callback at
// once, from the browser br, and returns the answers.
func racedCallbacks(t *testing.T, gs []*gateway, br *consentBrowser, redirect *url.URL) []response {
	t.Helper()
	out := make([]response, len(gs))
	errs := make([]error, len(gs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest("GET", "http://"+g.addr+"/connect/callback?"+redirect.RawQuery, nil)
			if err != nil {
				errs[i] = err
				return
			}
			<-start
			resp, err := br.c.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out[i], errs[i] = response{Response: resp, body: b}, err
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// consent opens the consent's start link in the browser br, which it
// sends to the double's consent page, and allows there, returning the
// redirect to the gateway's callback.
func consent(t *testing.T, x *vendortest.Xero, br *consentBrowser, authorizeURL string) *url.URL {
	t.Helper()
	u, err := x.Identity.Allow(br.start(t, authorizeURL))
	if err != nil {
		t.Fatal(err)
	}
	if u.Query().Get("code") == "" || u.Query().Get("state") == "" {
		t.Fatalf("the double redirects to %s", u)
	}
	return u
}

// refusedState checks an answer is the contract's invalid_state:
// {"error":{"code","message","request_id","param":"state"}}.
func refusedState(t *testing.T, r response, what string) {
	t.Helper()
	var body struct {
		Error struct {
			Code, Message, Param string
			RequestID            string `json:"request_id"`
		} `json:"error"`
	}
	err := json.Unmarshal(r.body, &body)
	e := body.Error
	if err != nil || r.StatusCode != http.StatusBadRequest || r.Header.Get("Content-Type") != "application/json" ||
		e.Code != "invalid_state" || e.Message == "" || e.Param != "state" || !strings.HasPrefix(e.RequestID, "req_") ||
		e.RequestID != r.Header.Get("Request-Id") {
		t.Fatalf("%s: %d %s %s", what, r.StatusCode, r.Header.Get("Content-Type"), r.body)
	}
}

// TestConnectionsAcrossTwoGateways is issue 26 on two instances sharing
// one Redis: a connection made through A is served by B within a second
// or two and synced once; the consent's state is single use across
// instances, bound to its connection's attempt and refused once expired;
// Karbon connected through B by its access key gets its webhook
// subscriptions once and the check at start makes a cancelled one again;
// a disconnect through B stops A serving; and no token, code, state, key
// or signing key shows in either gateway's logs, any answer, the
// metrics or Redis.
func TestConnectionsAcrossTwoGateways(t *testing.T) {
	redis := redistest.Start(t)
	addrA := freePort(t)
	f := startConnectFirm(t, addrA)
	env := []string{"PRACTICEGW_REDIS=" + redis.URL(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}
	a := f.gateway(t, addrA, env...)
	b := f.gateway(t, "", env...)
	rec := &seen{}
	var states, codes []string
	adminCred := a.issue("frm_hollis", false, "admin", "invoices:read")
	tok := adminCred.Token
	// The administrator's browser: every consent starts and finishes in
	// it, on whichever instance its requests land.
	admin := newConsentBrowser(t)

	// A connection started and disconnected before its consent: its
	// state, allowed at the vendor, does not finish the next connection
	// of the role.
	gone := connectionOf(t, rec.keep(a.do(t, "POST", "/v1/connections", tok, map[string]any{"role": "ledger", "system": "xero"})))
	goneConsent := consent(t, f.x, admin, gone["authorize_url"].(string))
	if r := rec.keep(b.do(t, "DELETE", "/v1/connections/"+gone["id"].(string), tok, nil)); r.StatusCode/100 != 2 {
		t.Fatalf("disconnecting a pending connection: %d %s", r.StatusCode, r.body)
	}

	// A connection started through A, its first consent overtaken by a
	// reconnect: the first attempt's state is refused.
	created := connectionOf(t, rec.keep(a.do(t, "POST", "/v1/connections", tok, map[string]any{"role": "ledger", "system": "xero"})))
	id, _ := created["id"].(string)
	if created["status"] != "pending" || !strings.HasPrefix(id, "con_") {
		t.Fatalf("created: %v", created)
	}
	first := consent(t, f.x, admin, created["authorize_url"].(string))
	again := connectionOf(t, rec.keep(a.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"reconnect": true})))
	before := stable(t, connectionOf(t, rec.keep(b.do(t, "GET", "/v1/connections/"+id, tok, nil))))
	refusedState(t, callback(t, a, rec, admin, first), "the state of an attempt the connection moved past")
	refusedState(t, callback(t, b, rec, admin, goneConsent), "the state of another connection, disconnected")
	if c := connectionOf(t, rec.keep(a.do(t, "GET", "/v1/connections/"+gone["id"].(string), tok, nil))); c["status"] != "disconnected" {
		t.Fatalf("a consent of a disconnected connection: %v", c)
	}

	// A forged state, on either instance.
	forged := url.Values{"state": {randomHex(32)}, "code": {"c0de"}}
	refusedState(t, callback(t, a, rec, admin, &url.URL{RawQuery: forged.Encode()}), "a forged state on A")
	refusedState(t, callback(t, b, rec, admin, &url.URL{RawQuery: forged.Encode()}), "a forged state on B")

	// An expired state: its record in Redis says it expired a second ago
	// (its TTL left as it was), as it would after ten minutes.
	second := consent(t, f.x, admin, again["authorize_url"].(string))
	expire(t, redis, second.Query().Get("state"))
	refusedState(t, callback(t, b, rec, admin, second), "an expired state")
	if now := stable(t, connectionOf(t, rec.keep(a.do(t, "GET", "/v1/connections/"+id, tok, nil)))); now != before {
		t.Fatalf("refused consents changed the connection:\nbefore %s\nafter  %s", before, now)
	}

	// The third attempt's consent connects; its link replayed on A or on
	// B is refused and changes nothing.
	third := connectionOf(t, rec.keep(a.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"reconnect": true})))
	last := consent(t, f.x, admin, third["authorize_url"].(string))
	for _, u := range []*url.URL{goneConsent, first, second, last} {
		states, codes = append(states, u.Query().Get("state")), append(codes, u.Query().Get("code"))
	}
	// The browser's redirect raced on both instances at once (a double
	// click behind a load balancer): one finishes the consent, every other
	// is refused.
	var done map[string]any
	for _, r := range racedCallbacks(t, []*gateway{a, b, a, b, a, b}, admin, last) {
		rec.keep(r)
		if r.StatusCode == http.StatusOK {
			if done != nil {
				t.Fatalf("two callbacks finished one consent: %s", r.body)
			}
			done = r.json(t)
			continue
		}
		refusedState(t, r, "the link raced on A and B")
	}
	if done["status"] != "connected" || done["tenant_name"] != "Demo Company (UK)" {
		t.Fatalf("after the consent: %v; %s", done, rec.keep(a.do(t, "GET", "/v1/connections/"+id, tok, nil)).body)
	}
	if n := len(f.x.Identity.Grants()); n != 1 {
		t.Fatalf("the code was exchanged into %d grants", n)
	}
	connected := stable(t, connectionOf(t, rec.keep(a.do(t, "GET", "/v1/connections/"+id, tok, nil))))
	refusedState(t, callback(t, a, rec, admin, last), "the link replayed on A")
	refusedState(t, callback(t, b, rec, admin, last), "the link replayed on B")
	if now := stable(t, connectionOf(t, rec.keep(b.do(t, "GET", "/v1/connections/"+id, tok, nil)))); now != connected {
		t.Fatalf("a replayed link changed the connection:\nbefore %s\nafter  %s", connected, now)
	}

	// B lists it, says it is connected and serves its invoices.
	eventually.NoError(t, 2*time.Second, poll, "B to list the connection connected", func() error {
		r := rec.keep(b.do(t, "GET", "/v1/connections", tok, nil))
		var list struct {
			Data []map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.body, &list); err != nil || r.StatusCode != 200 {
			return fmt.Errorf("%d %s", r.StatusCode, r.body)
		}
		for _, c := range list.Data {
			if c["id"] == id && c["status"] == "connected" {
				return nil
			}
		}
		return fmt.Errorf("%s", r.body)
	})
	eventually.NoError(t, 30*time.Second, 20*time.Millisecond, "B to serve the organisation's invoices", func() error {
		r := rec.keep(b.do(t, "GET", "/v1/invoices?limit=100", tok, nil))
		if n := strings.Count(string(r.body), `"INV-`); r.StatusCode != 200 || n != 30 {
			return fmt.Errorf("%d, %d invoices: %s", r.StatusCode, n, tail(string(r.body), 300))
		}
		return nil
	})
	// One instance runs the sync: the organisation is read in full once,
	// and only that instance has called Xero.
	if reads := fullReads(f.x); len(reads) != 1 {
		t.Errorf("the invoices were read in full %d times: %q", len(reads), reads)
	}
	calledXero := 0
	for _, g := range []*gateway{a, b} {
		if c := connectionOf(t, rec.keep(g.do(t, "GET", "/v1/connections/"+id, tok, nil))); c["last_success_at"] != nil {
			calledXero++
		}
	}
	if calledXero != 1 {
		t.Errorf("%d instances called Xero for the sync", calledXero)
	}

	// Karbon through B: a wrong key is refused without being echoed; the
	// right one connects and makes each subscription once, not once per
	// instance.
	wrong := "wrong-" + randomHex(12)
	r := rec.keep(b.do(t, "POST", "/v1/connections", tok, map[string]any{"role": "records", "system": "karbon", "access_key": wrong}))
	if e, _ := r.json(t)["error"].(map[string]any); r.StatusCode != 400 || e["code"] != "parameter_invalid" || e["param"] != "access_key" ||
		strings.Contains(string(r.body), wrong) {
		t.Fatalf("a wrong access key: %d %s", r.StatusCode, r.body)
	}
	karbon := connectionOf(t, rec.keep(b.do(t, "POST", "/v1/connections", tok,
		map[string]any{"role": "records", "system": "karbon", "access_key": f.k.AccessKey})))
	if karbon["status"] != "connected" {
		t.Fatalf("karbon: %v", karbon)
	}
	signingKeys := subscribedOnce(t, f.k, 5*time.Second)
	if made := subscriptionsMade(f.k); len(made) != 3 {
		t.Fatalf("%d subscriptions made for three types: %q", len(made), made)
	}
	for _, sub := range f.k.Subscriptions() {
		if want := "http://" + addrA + "/connect/webhooks/karbon/" + karbon["id"].(string); sub.TargetUrl != want {
			t.Errorf("the %s subscription delivers to %s, not %s", sub.WebhookType, sub.TargetUrl, want)
		}
	}

	// Karbon signs its deliveries with the key B made; A, where they
	// arrive, checks them with it. A answers 404 until it follows the
	// connection (within the follow loop's 500 ms), then 401 to an
	// unsigned delivery; a delivery is 503 while the Karbon budget the
	// backfill spends makes it wait too long, which Karbon delivers again.
	hook := "/connect/webhooks/karbon/" + karbon["id"].(string)
	eventually.NoError(t, 2*time.Second, poll, "A to follow the Karbon connection", func() error {
		if r := rec.keep(a.do(t, "POST", hook, "", "{}")); r.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("an unsigned delivery: %d %s", r.StatusCode, r.body)
		}
		return nil
	})
	f.k.MoveWorkItem("W0001", "Completed", "")
	eventually.NoError(t, 30*time.Second, 200*time.Millisecond, "A to take Karbon's delivery", func() error {
		got, err := f.k.Deliver("Work", vendortest.KarbonWebhook("Work", "W0001", "Updated", time.Now()), f.k.AccessKey)
		if err != nil || len(got) != 1 || got[0] != http.StatusOK {
			return fmt.Errorf("%v %v", got, err)
		}
		return nil
	})

	// Karbon cancels one; the check a gateway makes at start makes it
	// again (the hourly check is the unit tests').
	f.k.CancelSubscription("Work")
	b.stop()
	firstB := b.logs.String()
	b.start(f.config)
	signingKeys = append(signingKeys, subscribedOnce(t, f.k, 20*time.Second)...)
	if made := subscriptionsMade(f.k); len(made) != 4 {
		t.Fatalf("%d subscriptions made, not the three and the one cancelled: %q", len(made), made)
	}

	if reads := fullReads(f.x); len(reads) != 1 {
		t.Errorf("after B's restart, the invoices were read in full %d times: %q", len(reads), reads)
	}

	// Redis while both systems are connected, their tokens and keys
	// kept.
	connectedRedis := redisValues(t, redis)
	if !strings.Contains(connectedRedis, id+"/token") || !strings.Contains(connectedRedis, karbon["id"].(string)+"/access_key") {
		t.Fatalf("Redis keeps neither the Xero token nor the Karbon access key of the connections:\n%s", tail(connectedRedis, 2000))
	}

	// A disconnect through B revokes the grant and stops A serving.
	refresh := f.x.Identity.Grants()[0].RefreshToken
	disconnected := rec.keep(b.do(t, "DELETE", "/v1/connections/"+id, tok, nil)).json(t)
	// A token names its credential, not the credential's name.
	if want := "disconnected by credential " + adminCred.ID + " through the API"; disconnected["status"] != "disconnected" || disconnected["reason"] != want {
		t.Errorf("the disconnected connection says %v %q, want disconnected %q", disconnected["status"], disconnected["reason"], want)
	}
	eventually.NoError(t, 5*time.Second, poll, "A to stop serving the ledger", func() error {
		r := rec.keep(a.do(t, "GET", "/v1/invoices", tok, nil))
		if r.StatusCode != http.StatusConflict || r.errorCode(t) != "system_not_connected" {
			return fmt.Errorf("%d %s", r.StatusCode, tail(string(r.body), 300))
		}
		return nil
	})
	if !f.x.Identity.Revoked(refresh) {
		t.Error("the disconnect did not revoke the grant at Xero")
	}

	// The operator connects Xero again from a terminal through A; B
	// serves it.
	redirect, printed := connectXeroByCLI(t, a, f)
	states, codes = append(states, redirect.Query().Get("state")), append(codes, redirect.Query().Get("code"))
	waitInvoices(t, b, tok, 30)

	// No secret anywhere.
	secrets := append(f.x.Identity.Issued(), states...)
	secrets = append(secrets, codes...)
	secrets = append(secrets, signingKeys...)
	secrets = append(secrets, f.k.AccessKey, wrong, f.k.Bearer, f.x.Identity.ClientSecret)
	places := map[string]string{
		"A's logs": a.logs.String(), "B's logs": firstB + b.logs.String(),
		"A's /readyz": string(a.do(t, "GET", "/readyz", "", nil).body), "B's /readyz": string(b.do(t, "GET", "/readyz", "", nil).body), "an answer": rec.text(), "the command's output": printed,
		"A's metrics": metrics(t, a), "B's metrics": metrics(t, b), "Redis while connected": connectedRedis, "Redis": redisValues(t, redis),
	}
	if !strings.Contains(places["A's metrics"], "practicegw_connections") {
		t.Errorf("A's metrics have no practicegw_connections: %s", tail(places["A's metrics"], 500))
	}
	noSecrets(t, places, secrets)
}

// fullReads are the requests of the organisation's invoices that read
// them all (page 1 with no If-Modified-Since): one per backfill.
func fullReads(x *vendortest.Xero) []string {
	var out []string
	for _, r := range x.Requests() {
		if strings.Contains(r, "page=1&") && strings.Count(r, " ") == 1 {
			out = append(out, r)
		}
	}
	return out
}

// subscriptionsMade are the requests that made a webhook subscription
// at the double.
func subscriptionsMade(k *vendortest.Karbon) []string {
	var out []string
	for _, r := range k.Requests() {
		if strings.HasPrefix(r, "POST /v3/WebhookSubscriptions") {
			out = append(out, r)
		}
	}
	return out
}

// subscribedOnce waits until the double has exactly one Work, Contact and
// User subscription of the firm's access key, and returns their signing
// keys.
func subscribedOnce(t *testing.T, k *vendortest.Karbon, within time.Duration) []string {
	t.Helper()
	var keys []string
	eventually.NoError(t, within, 20*time.Millisecond, "one Work, Contact and User subscription", func() error {
		count := map[string]int{}
		keys = nil
		for _, s := range k.Subscriptions() {
			if s.AccessKey == k.AccessKey {
				count[s.WebhookType]++
				keys = append(keys, s.SigningKey)
			}
		}
		if count["Work"] != 1 || count["Contact"] != 1 || count["User"] != 1 || len(count) != 3 {
			return fmt.Errorf("subscriptions by type: %v", count)
		}
		for _, key := range keys {
			if len(key) < 16 {
				return fmt.Errorf("a signing key of %d characters", len(key))
			}
		}
		return nil
	})
	return keys
}

// expire rewrites the consent awaited for state so that it expired a
// second ago, its TTL in Redis left as it was: the gateway takes no
// injected clock, and the store keeps no consent already expired.
func expire(t *testing.T, redis *redistest.Server, state string) {
	t.Helper()
	// The store keys a consent awaited by the digest of its state.
	expireInRedis(t, redis, "pgw:{connect}:auth:", state)
}

// expireInRedis rewrites the record Redis keeps under prefix and the
// SHA-256 of secret so that it says it expired a second ago.
func expireInRedis(t *testing.T, redis *redistest.Server, prefix, secret string) {
	t.Helper()
	rdb := redisClient(t, redis)
	ctx := context.Background()
	sum := sha256.Sum256([]byte(secret))
	key := prefix + hex.EncodeToString(sum[:])
	var rec map[string]any
	raw, err := rdb.Get(ctx, key).Bytes()
	if err != nil || json.Unmarshal(raw, &rec) != nil || rec["expires"] == nil {
		t.Fatalf("%s: %v %s", key, err, raw)
	}
	rec["expires"] = time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	raw, _ = json.Marshal(rec)
	if err := rdb.SetArgs(ctx, key, raw, goredis.SetArgs{KeepTTL: true}).Err(); err != nil {
		t.Fatal(err)
	}
}

func redisClient(t *testing.T, redis *redistest.Server) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(redis.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// redisValues is every key in Redis with its value, whatever its type.
func redisValues(t *testing.T, redis *redistest.Server) string {
	t.Helper()
	rdb := redisClient(t, redis)
	ctx := context.Background()
	var out strings.Builder
	iter := rdb.Scan(ctx, 0, "*", 0).Iterator()
	n := 0
	for iter.Next(ctx) {
		key := iter.Val()
		n++
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, key).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, key).Result()
		case "list":
			v, err = rdb.LRange(ctx, key, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, key).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, key, "-", "+").Result()
		default:
			t.Fatalf("%s is a %s", key, typ)
		}
		if err != nil && err != goredis.Nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s %v\n", key, v)
	}
	if err := iter.Err(); err != nil || n == 0 {
		t.Fatalf("scanning Redis: %v, %d keys", err, n)
	}
	return out.String()
}

// metrics is the gateway's Prometheus exposition, from its admin
// endpoint.
func metrics(t *testing.T, g *gateway) string {
	t.Helper()
	resp, err := client.Get("http://" + g.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// noSecrets fails t for each secret that shows in a place.
func noSecrets(t *testing.T, places map[string]string, secrets []string) {
	t.Helper()
	if len(secrets) < 8 {
		t.Fatalf("only %d secrets to look for", len(secrets))
	}
	for where, text := range places {
		if len(text) < 100 {
			t.Fatalf("%s has nothing to look in: %q", where, text)
		}
	}
	for _, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("a secret of %d characters cannot be looked for", len(s))
		}
		for where, text := range places {
			if strings.Contains(text, s) {
				t.Errorf("%s shows a secret (%.6s…)", where, s)
			}
		}
	}
}

// randomHex is n random bytes in hex: a value no gateway made.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
