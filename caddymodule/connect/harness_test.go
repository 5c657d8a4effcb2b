package connect_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/practicegw/practicegw/adapters/dropbox"
	"github.com/practicegw/practicegw/adapters/firmsystem"
	_ "github.com/practicegw/practicegw/adapters/google_drive"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	_ "github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/adapters/vendortest"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/internal/testclock"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// memStore keeps connections and authorizations as part B's stores do:
// versions compared on write, a state taken once, expiry by now.
// beforeUpdate, when set, runs once before the next update: another
// writer that comes first.
type memStore struct {
	mu           sync.Mutex
	cons         map[string]connection.Connection
	order        []string
	auths        map[string]connection.Authorization
	browsers     map[string]string // state -> the browser that started its consent
	verifiers    []string          // every one saved, to look for in logs and views
	beforeUpdate func()
	history      *history
	// yield, when set, runs before every call: a scheduler's chance to
	// run another goroutine first.
	yield func()
}

func (s *memStore) sched() {
	if s.yield != nil {
		s.yield()
	}
}

func newMemStore() *memStore {
	return &memStore{cons: map[string]connection.Connection{}, auths: map[string]connection.Authorization{}, browsers: map[string]string{},
		history: &history{}}
}

func (s *memStore) CreateConnection(_ context.Context, c connection.Connection) (connection.Connection, error) {
	s.sched()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cons[c.ID]; ok {
		return connection.Connection{}, connection.ErrExists
	}
	c.Version = 1
	s.cons[c.ID] = c
	s.order = append(s.order, c.ID)
	return c, nil
}

func (s *memStore) Connection(_ context.Context, id string) (connection.Connection, error) {
	s.sched()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cons[id]
	if !ok {
		return connection.Connection{}, connection.ErrNotFound
	}
	c.Choices = slices.Clone(c.Choices)
	return c, nil
}

func (s *memStore) Connections(_ context.Context, firm string) ([]connection.Connection, error) {
	s.sched()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []connection.Connection
	for _, id := range s.order {
		if c := s.cons[id]; firm == "" || c.Firm == firm {
			out = append(out, c)
		}
	}
	return out, nil
}

func (s *memStore) UpdateConnection(_ context.Context, c connection.Connection, version int64) (connection.Connection, error) {
	s.sched()
	s.mu.Lock()
	hook := s.beforeUpdate
	s.beforeUpdate = nil
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.cons[c.ID]
	if !ok {
		return connection.Connection{}, connection.ErrNotFound
	}
	if old.Version != version {
		return connection.Connection{}, connection.ErrVersion
	}
	c.Version = version + 1
	s.cons[c.ID] = c
	s.history.add(fmt.Sprintf("%s %s %s", c.ID, c.Status, c.OrganisationID))
	return c, nil
}

// history is what the store and the runtime were asked, in order: each
// write of a connection ("<id> <status> <organisation>") and each purge of
// an organisation ("purge <id> <organisation>").
type history struct {
	mu    sync.Mutex
	lines []string
}

func (h *history) add(line string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
}

func (h *history) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lines)
}

func (s *memStore) SaveAuthorization(_ context.Context, a connection.Authorization) error {
	s.sched()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auths[a.OAuthState] = a
	s.verifiers = append(s.verifiers, a.Verifier)
	return nil
}

func (s *memStore) StartAuthorization(_ context.Context, token, browser string, now time.Time) (connection.Authorization, error) {
	s.sched()
	s.mu.Lock()
	defer s.mu.Unlock()
	for state, a := range s.auths {
		if a.Start != "" && a.Start == token {
			a.Start = ""
			s.auths[state], s.browsers[state] = a, browser
			if !now.Before(a.Expires) {
				return connection.Authorization{}, connection.ErrNotFound
			}
			return a, nil
		}
	}
	return connection.Authorization{}, connection.ErrNotFound
}

func (s *memStore) TakeAuthorization(_ context.Context, state, browser string, now time.Time) (connection.Authorization, error) {
	s.sched()
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.auths[state]
	if ok && now.Before(a.Expires) && (browser == "" || s.browsers[state] != browser) {
		return connection.Authorization{}, connection.ErrOtherBrowser
	}
	delete(s.auths, state)
	if !ok || !now.Before(a.Expires) {
		return connection.Authorization{}, connection.ErrNotFound
	}
	return a, nil
}

// memLocks are upstream.Locks in memory, on the harness clock.
type memLocks struct {
	mu    sync.Mutex
	now   func() time.Time
	held  map[string]string
	until map[string]time.Time
}

func (l *memLocks) Lease(_ context.Context, name, holder string, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[name]; ok && h != holder && l.now().Before(l.until[name]) {
		return false, nil
	}
	l.held[name], l.until[name] = holder, l.now().Add(ttl)
	return true, nil
}

func (l *memLocks) Release(_ context.Context, name, holder string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[name] == holder {
		delete(l.held, name)
	}
	return nil
}

type firms struct{ configured map[string]bool }

func (f firms) FirmName(id string) (string, bool) {
	switch id {
	case "frm_a":
		return "Hollis & Vane LLP", true
	case "frm_b":
		return "Other & Co", true
	}
	return "", false
}

func (f firms) Configured(firm, role string) bool { return f.configured[firm+"/"+role] }

// fakeRuntime records the purges asked for.
type fakeRuntime struct {
	mu     sync.Mutex
	purged []string
	fail   error
	// history is the store's, where purges of an organisation are
	// written in order with the connection's writes.
	history *history
	// copy, when set, is the firms' copy in a real store, which a purge
	// (of an organisation, or on a disconnect) fences and purges as the
	// gateway does: first the fence, then the old records.
	copy copyStore
}

// copyStore is a read model store with fences and purges.
type copyStore interface {
	readmodel.Store
	readmodel.Fencer
	readmodel.Purger
}

func (r *fakeRuntime) PurgeOrganisation(ctx context.Context, c connection.Connection) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if r.copy != nil {
		if err := r.copy.RaiseFence(ctx, readmodel.Fence{Firm: c.Firm, Name: c.ID, Generation: int64(c.Attempt)}); err != nil {
			return err
		}
		if err := r.copy.Purge(ctx, c.Firm, firmsystem.Kinds(c.Role), nil); err != nil {
			return err
		}
	}
	r.history.add(fmt.Sprintf("purge %s %s", c.ID, c.OrganisationID))
	return nil
}

// Purge fences and purges the copy, when set, as the gateway does on a
// disconnect: first the fence past every attempt (a disconnected
// connection never writes again), then the records.
func (r *fakeRuntime) Purge(ctx context.Context, c connection.Connection) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if r.copy != nil {
		if err := r.copy.RaiseFence(ctx, readmodel.Fence{Firm: c.Firm, Name: c.ID, Generation: math.MaxInt64}); err != nil {
			return err
		}
		if err := r.copy.Purge(ctx, c.Firm, firmsystem.Kinds(c.Role), nil); err != nil {
			return err
		}
	}
	r.purged = append(r.purged, c.ID)
	return nil
}

func (r *fakeRuntime) Use(connection.Connection) (*time.Time, []connection.SyncStatus) {
	return nil, []connection.SyncStatus{{Role: "ledger", State: "backfilling"}}
}

func (r *fakeRuntime) purges() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.purged)
}

// vendor is every vendor's identity service and the API calls a
// connection makes, minimal, on one server: an authorization code is
// bound to its PKCE challenge and redirect, and the token endpoint checks
// the verifier and the client's credentials as the vendor does.
type vendor struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	seq        int
	codes      map[string]grant
	refresh    map[string]bool // refresh tokens outstanding
	exchanges  int
	tenants    []map[string]string
	sites      []map[string]string
	revoked    []string // "xero:<token>" ...
	revokeFail bool
	garbage    map[string]bool // paths answered 200 with a body no vendor sends
	down       map[string]bool // paths answered 503
	missing    map[string]bool // paths answered 404
	// refused are Karbon paths answered 401 whatever the key: Karbon
	// refusing a key it took a moment before.
	refused   map[string]bool
	karbonKey string
	// karbonGlitches are how many of the next Karbon calls are refused
	// whatever their key: a glitch at Karbon.
	karbonGlitches int
	subs           map[string]map[string]any
	subCalls       []string
	tokens         []string // every token and code handed out
}

type grant struct {
	challenge, redirect, client string
}

func newVendor(t *testing.T) *vendor {
	v := &vendor{t: t, codes: map[string]grant{}, refresh: map[string]bool{}, karbonKey: "kb-access-key-7c1f", garbage: map[string]bool{}, down: map[string]bool{}, missing: map[string]bool{}, refused: map[string]bool{},
		subs:    map[string]map[string]any{},
		tenants: []map[string]string{{"id": "c1", "tenantId": "org-1", "tenantType": "ORGANISATION", "tenantName": "Hollis Ledger"}}}
	karbon := vendortest.KarbonConforming(t, http.HandlerFunc(v.serve))
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v3/") {
			karbon.ServeHTTP(w, r)
			return
		}
		v.serve(w, r)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *vendor) URL() string { return v.srv.URL }

// adminBrowser is the value of the administrator's browser's consent
// cookie, one the gateway could have made.
const adminBrowser = "YWRtaW5pc3RyYXRvcnMtYnJvd3Nlci1jb29raWUtMDE"

// open is the administrator's browser following a consent's start link
// through m: the vendor's consent page it is sent to, after the checks of
// the cookie it is given.
func (h *harness) open(m *connect.Manager, startURL string) (string, error) {
	h.t.Helper()
	token, ok := strings.CutPrefix(startURL, "https://gw.example.com"+connect.StartPath)
	if !ok {
		h.t.Fatalf("the consent's link %q is not the gateway's start link", startURL)
	}
	started, err := m.Start(ctx, token, adminBrowser)
	if err != nil {
		return "", err
	}
	c := started.Cookie
	if c.Name != connect.BrowserCookie || c.Value != adminBrowser || c.Path != "/connect" || !c.HttpOnly || !c.Secure ||
		c.SameSite != http.SameSiteLaxMode || c.MaxAge <= 0 || c.MaxAge > int(connection.AuthorizationTTL/time.Second) {
		h.t.Fatalf("the start link's cookie: %+v", c)
	}
	return started.Location, nil
}

// consentPage is the vendor's consent page the start link sends the
// administrator's browser to.
func (h *harness) consentPage(startURL string) string {
	h.t.Helper()
	page, err := h.open(h.m, startURL)
	if err != nil {
		h.t.Fatalf("opening the consent's link: %v", err)
	}
	return page
}

// allow is the administrator following a consent's start link and
// allowing at the vendor: the query of the vendor's redirect back.
func (h *harness) allow(startURL string) url.Values {
	h.t.Helper()
	return h.v.consent(h.consentPage(startURL))
}

// consent is the administrator's browser at the consent page: it checks
// the page's parameters and answers the redirect back to the gateway.
func (v *vendor) consent(authorizeURL string) url.Values {
	v.t.Helper()
	u, err := url.Parse(authorizeURL)
	if err != nil {
		v.t.Fatal(err)
	}
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("response_type") != "code" {
		v.t.Fatalf("consent page without PKCE S256: %s", authorizeURL)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	code := fmt.Sprintf("code-%d-9f2a", v.seq)
	v.codes[code] = grant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), client: q.Get("client_id")}
	v.tokens = append(v.tokens, code)
	return url.Values{"code": {code}, "state": {q.Get("state")}}
}

func (v *vendor) serve(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if v.down[r.URL.Path] {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if v.missing[r.URL.Path] {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if v.garbage[r.URL.Path] {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `<html>maintenance</html>`)
		return
	}
	switch {
	case r.URL.Path == "/token":
		v.token(w, r, body)
	case r.URL.Path == "/revoke" || r.URL.Path == "/2/auth/token/revoke":
		if v.revokeFail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		form, _ := url.ParseQuery(string(body))
		tok := form.Get("token")
		if r.URL.Path == "/2/auth/token/revoke" {
			tok = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		user, _, basic := r.BasicAuth()
		v.revoked = append(v.revoked, fmt.Sprintf("%s basic=%v client=%s%s", tok, basic, user, form.Get("client_id")))
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/connections":
		if !v.bearer(r) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(v.tenants)
	case r.URL.Path == "/v1.0/sites":
		if !v.bearer(r) || r.URL.Query().Get("search") != "*" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"value": v.sites})
	case strings.HasPrefix(r.URL.Path, "/v3/"):
		v.karbon(w, r, body)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (v *vendor) bearer(r *http.Request) bool {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.HasPrefix(tok, "at-")
}

func (v *vendor) token(w http.ResponseWriter, r *http.Request, body []byte) {
	form, _ := url.ParseQuery(string(body))
	fail := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":%q}`, code)
	}
	client, secret, ok := r.BasicAuth()
	if !ok {
		client, secret = form.Get("client_id"), form.Get("client_secret")
	}
	if secret != "app-secret-"+client {
		fail("invalid_client")
		return
	}
	if form.Get("grant_type") != "authorization_code" {
		fail("unsupported_grant_type")
		return
	}
	g, ok := v.codes[form.Get("code")]
	delete(v.codes, form.Get("code"))
	sum := sha256.Sum256([]byte(form.Get("code_verifier")))
	switch {
	case !ok, g.client != client, g.redirect != form.Get("redirect_uri"):
		fail("invalid_grant")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		v.t.Errorf("PKCE verifier does not match the challenge")
		fail("invalid_grant")
		return
	}
	v.exchanges++
	v.seq++
	at, rt := fmt.Sprintf("at-%d-51c0", v.seq), fmt.Sprintf("rt-%d-d3e8", v.seq)
	v.refresh[rt] = true
	v.tokens = append(v.tokens, at, rt)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 1800})
}

// karbon serves the Karbon calls a connection makes, refusing a body
// that Karbon's published description of POST /v3/WebhookSubscriptions
// does not allow.
func (v *vendor) karbon(w http.ResponseWriter, r *http.Request, body []byte) {
	glitch := v.karbonGlitches > 0
	if glitch {
		v.karbonGlitches--
	}
	if glitch || v.refused[r.URL.Path] || r.Header.Get("Authorization") != "Bearer kb-app-bearer" || r.Header.Get("AccessKey") != v.karbonKey {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"401","message":"Unauthorized"}}`)
		return
	}
	typ, _ := strings.CutPrefix(r.URL.Path, "/v3/WebhookSubscriptions/")
	v.subCalls = append(v.subCalls, r.Method+" "+r.URL.Path)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v3/Users":
		if r.URL.Query().Get("$top") != "1" {
			v.t.Errorf("key check lists %s, not one user", r.URL.RawQuery)
		}
		io.WriteString(w, `{"value":[{"UserKey":"u1"}]}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v3/WebhookSubscriptions":
		var sub map[string]any
		if err := json.Unmarshal(body, &sub); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := karbonSubscriptionBody(sub); err != nil {
			v.t.Errorf("POST /v3/WebhookSubscriptions %s: %v", body, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		typ := sub["WebhookType"].(string)
		if _, ok := v.subs[typ]; ok {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"400","message":"A subscription exists for this type"}}`)
			return
		}
		v.subs[typ] = sub
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"TargetUrl": sub["TargetUrl"], "WebhookType": typ})
	case r.Method == http.MethodGet && typ != "":
		sub, ok := v.subs[typ]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":"404","message":"No webhook subscription"}}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"TargetUrl": sub["TargetUrl"], "WebhookType": typ})
	case r.Method == http.MethodDelete && typ != "":
		if _, ok := v.subs[typ]; !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		delete(v.subs, typ)
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

var signingKeyPattern = regexp.MustCompile(`^[A-Za-z0-9-_]+$`)

// karbonSubscriptionBody checks a subscription as Karbon's description
// defines it: TargetUrl an absolute URI of at most 2000 characters,
// WebhookType one of its types, SigningKey at least 16 letters, digits,
// dashes or underscores, and nothing else.
func karbonSubscriptionBody(sub map[string]any) error {
	for k := range sub {
		if k != "TargetUrl" && k != "WebhookType" && k != "SigningKey" {
			return fmt.Errorf("field %s is not Karbon's", k)
		}
	}
	target, _ := sub["TargetUrl"].(string)
	if u, err := url.Parse(target); err != nil || !u.IsAbs() || len(target) > 2000 {
		return fmt.Errorf("TargetUrl %q", target)
	}
	typ, _ := sub["WebhookType"].(string)
	if !slices.Contains([]string{"Contact", "Work", "Note", "User", "IntegrationTask", "Invoice", "EstimateSummary"}, typ) {
		return fmt.Errorf("WebhookType %q", typ)
	}
	key, _ := sub["SigningKey"].(string)
	if len(key) < 16 || !signingKeyPattern.MatchString(key) {
		return fmt.Errorf("SigningKey %q", key)
	}
	return nil
}

// harness is one gateway instance's Manager over shared parts.
type harness struct {
	t       *testing.T
	v       *vendor
	store   *memStore
	state   changes.StateStore
	clock   *testclock.Clock
	locks   *memLocks
	rt      *fakeRuntime
	logs    []*observer.ObservedLogs
	cfg     *connect.Config
	m       *connect.Manager
	secrets []string
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, v: newVendor(t), store: newMemStore(), state: changes.NewMemoryState(),
		clock: testclock.New(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))}
	h.rt = &fakeRuntime{history: h.store.history}
	h.locks = &memLocks{now: h.clock.Now, held: map[string]string{}, until: map[string]time.Time{}}
	u := h.v.URL()
	app := func(name, client string, change func(*firmsystem.OAuthApp)) connect.AppConfig {
		a := firmsystem.OAuthApp{ClientID: client, ClientSecret: "{env.CONNECT_TEST_SECRET_" + strings.ToUpper(client) + "}",
			AuthorizeURL: u + "/authorize", TokenURL: u + "/token", RevokeURL: u + "/revoke",
			ConnectionsURL: u + "/connections", BaseURL: u}
		if change != nil {
			change(&a)
		}
		return appConfig(t, name, a)
	}
	for _, c := range []string{"xero", "ms", "google", "dbx"} {
		t.Setenv("CONNECT_TEST_SECRET_"+strings.ToUpper(c), "app-secret-"+c)
	}
	h.cfg = &connect.Config{PublicURL: "https://gw.example.com/", Apps: []connect.AppConfig{
		app("xero", "xero", nil),
		app("sharepoint", "ms", func(a *firmsystem.OAuthApp) { a.RevokeURL = "" }),
		app("google_drive", "google", nil),
		app("dropbox", "dbx", func(a *firmsystem.OAuthApp) { a.RevokeURL = u + "/2/auth/token/revoke" }),
		appConfig(t, "karbon", map[string]string{"bearer": "kb-app-bearer", "base_url": u}),
	}}
	provision(t, h.cfg)
	h.m = h.manager()
	t.Cleanup(h.checkNoSecretLogged)
	return h
}

// appConfig is the connect block's app name configured as cfg.
func appConfig(t *testing.T, name string, cfg any) connect.AppConfig {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return connect.AppConfig{Name: name, Raw: raw}
}

// provision loads cfg's apps as the practicegw app does, and checks it.
func provision(t *testing.T, cfg *connect.Config) {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := cfg.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// manager is another instance's Manager on the same store and state.
func (h *harness) manager() *connect.Manager {
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = append(h.logs, logs)
	return connect.New(h.cfg, connect.Deps{
		Connections: h.store, Authorizations: h.store, Firms: firms{configured: map[string]bool{"frm_b/ledger": true}},
		Runtime: h.rt,
		Upstream: upstream.Deps{State: h.state, Clock: h.clock, Locks: h.locks, Logger: zap.New(core),
			Budget: upstream.NewLocalBudget(h.clock)},
	})
}

// secret notes a value that must never show in a log line, error or view.
func (h *harness) secret(s ...string) { h.secrets = append(h.secrets, s...) }

func (h *harness) allSecrets() []string {
	h.v.mu.Lock()
	defer h.v.mu.Unlock()
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	return append(append(append([]string{h.v.karbonKey, "app-secret-xero", "app-secret-ms", "app-secret-google", "app-secret-dbx", "kb-app-bearer"}, h.v.tokens...), h.secrets...),
		h.store.verifiers...)
}

// checkNoSecretLogged reads every instance's log lines.
func (h *harness) checkNoSecretLogged() {
	for _, logs := range h.logs {
		for _, e := range logs.All() {
			line, _ := json.Marshal(map[string]any{"msg": e.Message, "fields": e.ContextMap()})
			h.noSecretIn("log line", string(line))
		}
	}
}

// logged lists the messages every instance logged.
func (h *harness) logged() []string {
	var out []string
	for _, logs := range h.logs {
		for _, e := range logs.All() {
			out = append(out, e.Message)
		}
	}
	return out
}

func (h *harness) noSecretIn(what, text string) {
	h.t.Helper()
	for _, s := range h.allSecrets() {
		if s != "" && strings.Contains(text, s) {
			// Said without the secret, as a log would have to.
			h.t.Errorf("%s shows a secret: %s", what, strings.ReplaceAll(text, s, "<secret>"))
		}
	}
}

// check fails the test on err, and on a secret in the view.
func (h *harness) check(v connection.View, err error) connection.View {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%v", err)
	}
	b, _ := json.Marshal(v)
	h.noSecretIn("view", string(b))
	return v
}

// depsWithClock are the harness's upstream deps on another clock.
func depsWithClock(h *harness, clock upstream.Clock) upstream.Deps {
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = append(h.logs, logs)
	return upstream.Deps{State: h.state, Clock: clock, Locks: h.locks, Logger: zap.New(core), Budget: upstream.NewLocalBudget(clock)}
}
