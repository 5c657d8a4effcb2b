package e2e

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/redistest"
)

// consentBrowser is a browser as a consent sees it: a cookie jar, and
// redirects answered rather than followed, so that a test sees where
// each one goes.
type consentBrowser struct {
	c *http.Client
}

func newConsentBrowser(t *testing.T) *consentBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consentBrowser{c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// get sends a GET from the browser, with its cookies.
func (br *consentBrowser) get(t *testing.T, u string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := br.c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Response: resp, body: b}
}

// start opens a consent's start link and answers the vendor's consent
// page it is sent to, failing t unless the gateway answers as the
// contract says: 302, and the cookie that binds the consent to this
// browser.
func (br *consentBrowser) start(t *testing.T, link string) string {
	t.Helper()
	if !strings.Contains(link, "/connect/start/") {
		t.Fatalf("the consent's link %s is not the gateway's start link", link)
	}
	r := br.get(t, link, "Accept", "text/html")
	page := r.Header.Get("Location")
	var cookie *http.Cookie
	for _, c := range r.Cookies() {
		if c.Name == "practicegw_consent" {
			cookie = c
		}
	}
	if r.StatusCode != http.StatusFound || page == "" || cookie == nil {
		t.Fatalf("the start link answered %d, Location %q, cookies %v: %s", r.StatusCode, page, r.Header["Set-Cookie"], r.body)
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/connect" || cookie.Secure ||
		cookie.MaxAge <= 0 || cookie.MaxAge > 600 {
		t.Fatalf("the start link's cookie: %s", r.Header.Get("Set-Cookie"))
	}
	return page
}

// callback sends the vendor's redirect to g's callback, as the browser
// would were it sent there.
func (br *consentBrowser) callback(t *testing.T, g *gateway, redirect *url.URL, headers ...string) response {
	t.Helper()
	return br.get(t, "http://"+g.addr+"/connect/callback?"+redirect.RawQuery, headers...)
}

// TestConsentLinkCompletedInAnotherBrowser is the attack a consent bound
// to its browser stops (RFC 6749 §10.12), on two gateways sharing Redis:
// an administrator's browser A opens the consent link on one, and the
// vendor's consent page it is sent to is completed in browser B, whose
// callback (on either gateway) is refused with 400 invalid_state; the
// organisation is not connected and no code is exchanged. Browser A then
// finishes it. A start link opened twice, or after it expired, is
// refused; a replayed POST answers the same connection and no link; and
// neither the link's token, the state, the code nor the browser's cookie
// shows in a log line, an answer replayed, or the store (Redis, or the
// bbolt file of a gateway on its own).
func TestConsentLinkCompletedInAnotherBrowser(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) { consentLinkInAnotherBrowser(t, nil) })
	t.Run("redis", func(t *testing.T) { consentLinkInAnotherBrowser(t, redistest.Start(t)) })
}

// consentLinkInAnotherBrowser is TestConsentLinkCompletedInAnotherBrowser
// on two gateways sharing redis, or on one gateway on its bbolt file
// (redis nil).
func consentLinkInAnotherBrowser(t *testing.T, redis *redistest.Server) {
	addrA := freePort(t)
	f := startConnectFirm(t, addrA)
	env := []string{"PRACTICEGW_SECRETS_KEY=" + secretsKey()}
	a := f.gateway(t, addrA, append(env, redisEnv(redis)...)...)
	b := a
	if redis != nil {
		b = f.gateway(t, "", append(env, redisEnv(redis)...)...)
	}
	tok := a.issue("frm_hollis", false, "admin").Token

	created := a.do(t, "POST", "/v1/connections", tok, map[string]any{"role": "ledger", "system": "xero"}, "Idempotency-Key", "ledger-1")
	c := connectionOf(t, created)
	id, link := c["id"].(string), c["authorize_url"].(string)
	if !strings.HasPrefix(link, "http://"+addrA+"/connect/start/") {
		t.Fatalf("authorize_url %q is not the gateway's start link", link)
	}
	token := strings.TrimPrefix(link, "http://"+addrA+"/connect/start/")
	// A retry of the POST answers the same connection, and no link.
	replay := b.do(t, "POST", "/v1/connections", tok, map[string]any{"role": "ledger", "system": "xero"}, "Idempotency-Key", "ledger-1")
	if r := connectionOf(t, replay); r["id"] != id || r["authorize_url"] != nil || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the POST replayed: %d %s", replay.StatusCode, replay.body)
	}

	browserA, browserB := newConsentBrowser(t), newConsentBrowser(t)
	page := browserA.start(t, link)
	// The link is single use, on either gateway and in either browser.
	for _, g := range []*gateway{a, b} {
		for _, br := range []*consentBrowser{browserA, browserB} {
			r := br.get(t, "http://"+g.addr+"/connect/start/"+token)
			if refusedStart(t, r, "a start link opened twice"); r.Header.Get("Location") != "" || len(r.Cookies()) != 0 {
				t.Fatalf("a start link opened twice sends the browser on: %v", r.Header)
			}
		}
	}
	// A page to a browser.
	if r := browserB.get(t, link, "Accept", "text/html"); r.StatusCode != http.StatusBadRequest ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), "invalid_state") {
		t.Fatalf("a start link opened twice, to a browser: %d %s", r.StatusCode, r.body)
	}

	// Browser B completes the consent page browser A was sent to.
	redirect, err := f.x.Identity.Allow(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*gateway{a, b} {
		refusedState(t, browserB.callback(t, g, redirect), "the callback in browser B")
		// No browser at all (a script given the redirect).
		refusedState(t, g.do(t, "GET", "/connect/callback?"+redirect.RawQuery, "", nil), "the callback with no cookie")
	}
	if r := browserB.callback(t, b, redirect, "Accept", "text/html"); r.StatusCode != http.StatusBadRequest ||
		!strings.Contains(string(r.body), "another browser") {
		t.Fatalf("the callback in browser B, to a browser: %d %s", r.StatusCode, r.body)
	}
	if n := len(f.x.Identity.Grants()); n != 0 {
		t.Fatalf("browser B's callback exchanged the code: %d grants", n)
	}
	if got := connectionOf(t, a.do(t, "GET", "/v1/connections/"+id, tok, nil)); got["status"] != "pending" || got["tenant_id"] != nil {
		t.Fatalf("after browser B's callback the connection is %v", got)
	}

	// Browser A, its callback landing on the other gateway, finishes it.
	done := browserA.callback(t, b, redirect)
	if got := connectionOf(t, done); got["status"] != "connected" || got["tenant_name"] != "Demo Company (UK)" {
		t.Fatalf("browser A's callback: %s", done.body)
	}
	refusedState(t, browserA.callback(t, a, redirect), "browser A's callback replayed")

	// An expired link: its record says it expired a second ago. (A bbolt
	// file is its gateway's alone while it runs: there the expiry is the
	// store's conformance suite's to show.)
	again := connectionOf(t, a.do(t, "PATCH", "/v1/connections/"+id, tok, map[string]any{"reconnect": true}))
	expiredLink := again["authorize_url"].(string)
	expiredToken := strings.TrimPrefix(expiredLink, "http://"+addrA+"/connect/start/")
	stored := "the bbolt file"
	if redis != nil {
		expireInRedis(t, redis, "pgw:{connect}:start:", expiredToken)
		refusedStart(t, browserA.get(t, "http://"+b.addr+"/connect/start/"+expiredToken), "an expired start link")
		stored = "Redis"
	}

	// Nothing that would finish a consent is in a log line, a replayed
	// answer or Redis; the access log has the routes, masked.
	cookie := ""
	for _, ck := range browserA.c.Jar.Cookies(&url.URL{Scheme: "http", Host: addrA, Path: "/connect/callback"}) {
		cookie = ck.Value
	}
	if len(cookie) != 43 {
		t.Fatalf("browser A's consent cookie %q", cookie)
	}
	logs := a.logs.String()
	if b != a {
		logs += b.logs.String()
	}
	noSecrets(t, map[string]string{"the gateways' logs": logs, "the POST replayed": string(replay.body), stored: storedValues(t, a, redis)},
		append([]string{token, expiredToken, redirect.Query().Get("state"), redirect.Query().Get("code"), cookie, page,
			f.x.Identity.ClientSecret}, f.x.Identity.Issued()...))
	for _, want := range []*regexp.Regexp{regexp.MustCompile(`"uri":"/connect/start/REDACTED"`),
		regexp.MustCompile(`"uri":"/connect/callback\?code=REDACTED(&|\\u0026)state=REDACTED"`)} {
		if !want.MatchString(logs) {
			t.Errorf("the access log has no line matching %s", want)
		}
	}
	if regexp.MustCompile(`"Location":\[`).MatchString(logs) {
		t.Error("the access log keeps a Location header")
	}
}

// refusedStart checks an answer is the contract's 400 invalid_state.
func refusedStart(t *testing.T, r response, what string) {
	t.Helper()
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || r.StatusCode != http.StatusBadRequest || body.Error.Code != "invalid_state" {
		t.Fatalf("%s: %d %s", what, r.StatusCode, r.body)
	}
}

// redisEnv points a gateway at redis, or leaves it on its bbolt file.
func redisEnv(redis *redistest.Server) []string {
	if redis == nil {
		return nil
	}
	return []string{"PRACTICEGW_REDIS=" + redis.URL()}
}

// storedValues is everything the gateways keep: Redis's values, or the
// bytes of g's data directory (its bbolt file), read as they lie on disk.
func storedValues(t *testing.T, g *gateway, redis *redistest.Server) string {
	t.Helper()
	if redis != nil {
		return redisValues(t, redis)
	}
	var out strings.Builder
	err := filepath.WalkDir(g.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out.Write(b)
		return err
	})
	if err != nil || out.Len() == 0 {
		t.Fatalf("reading %s: %v (%d bytes)", g.dataDir, err, out.Len())
	}
	return out.String()
}
