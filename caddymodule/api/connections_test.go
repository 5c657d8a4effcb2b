package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/connection"
	"github.com/practicegw/practicegw/store/credential"
)

// fakeConnections is a connection service at the edge of the API: it
// keeps connections in memory and finishes a consent the way the contract
// says the real one does (a start link is used once and binds its state
// to the browser, a state is used once, for one connection, by that
// browser).
type fakeConnections struct {
	mu       sync.Mutex
	conns    map[string]connection.View
	states   map[string]string // state -> connection id
	starts   map[string]string // start token -> state
	browsers map[string]string // state -> the browser that started it
	calls    int               // Connect calls
	err      error             // answered by every call when set
	n        int
}

func newFakeConnections() *fakeConnections {
	return &fakeConnections{conns: map[string]connection.View{}, states: map[string]string{}, starts: map[string]string{},
		browsers: map[string]string{}}
}

func (f *fakeConnections) List(_ context.Context, firm string) ([]connection.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []connection.View
	for _, v := range f.conns {
		if v.Firm == firm {
			out = append(out, v)
		}
	}
	return out, f.err
}

func (f *fakeConnections) Get(_ context.Context, firm, id string) (connection.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.conns[id]
	if !ok || v.Firm != firm {
		return connection.View{}, connection.ErrNotFound
	}
	return v, f.err
}

func (f *fakeConnections) Connect(_ context.Context, firm string, r connection.Request) (connection.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return connection.View{}, f.err
	}
	f.n++
	v := connection.View{Connection: connection.Connection{ID: fmt.Sprintf("con_%d", f.n), Firm: firm, Role: r.Role,
		System: r.System, Status: connection.Pending, Attempt: 1, Version: 1}}
	if r.AccessKey != "" {
		v.Status = connection.Connected
	} else {
		state, token := fmt.Sprintf("st_%d", f.n), fmt.Sprintf("start_%d", f.n)
		f.states[state], f.starts[token] = v.ID, state
		v.AuthorizeURL = "https://gw.example/connect/start/" + token
	}
	f.conns[v.ID] = v
	return v, nil
}

func (f *fakeConnections) Update(_ context.Context, firm, id string, r connection.Request) (connection.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.conns[id]
	if !ok || v.Firm != firm {
		return connection.View{}, connection.ErrNotFound
	}
	if r.OrganisationID != "" {
		v.Status, v.OrganisationID, v.OrganisationName, v.Choices = connection.Connected, r.OrganisationID, "Org "+r.OrganisationID, nil
	}
	v.Version++
	f.conns[id] = v
	return v, f.err
}

func (f *fakeConnections) Disconnect(_ context.Context, firm, id string) (connection.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.conns[id]
	if !ok || v.Firm != firm {
		return connection.View{}, connection.ErrNotFound
	}
	v.Status = connection.Disconnected
	f.conns[id] = v
	return v, f.err
}

func (f *fakeConnections) Start(_ context.Context, token, browser string) (connect.Started, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	state, ok := f.starts[token]
	if !ok {
		return connect.Started{}, connection.ErrNotFound
	}
	delete(f.starts, token)
	if browser == "" {
		browser = "browser-of-" + state
	}
	f.browsers[state] = browser
	return connect.Started{Location: "https://login.example/authorize?state=" + state,
		Cookie: &http.Cookie{Name: connect.BrowserCookie, Value: browser, Path: "/connect", HttpOnly: true, SameSite: http.SameSiteLaxMode}}, nil
}

func (f *fakeConnections) Callback(_ context.Context, q url.Values, browser string) (connection.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.states[q.Get("state")]
	if !ok {
		return connection.View{}, connection.ErrNotFound
	}
	if b := f.browsers[q.Get("state")]; b == "" || b != browser {
		return connection.View{}, connection.ErrOtherBrowser
	}
	delete(f.states, q.Get("state"))
	if q.Get("error") != "" {
		return f.conns[id], nil
	}
	v := f.conns[id]
	v.Status, v.OrganisationName, v.AuthorizeURL = connection.Connected, "Demo Company (UK)", ""
	f.conns[id] = v
	return v, nil
}

type fakeFirms map[string]string

func (f fakeFirms) FirmName(id string) (string, bool) { n, ok := f[id]; return n, ok }

func connectionHandler(t *testing.T, svc ConnectionService) *Handler {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	secrets, _ := sealed.Random()
	st, err := bolt.New(db, nil, bolt.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &Handler{logger: zap.NewNop(), metrics: m, MaxBodyBytes: defaultMaxBody, tenants: webhooksOnly{},
		idempotency: st, connections: svc, firms: fakeFirms{"frm_hollis": "Hollis & Vane <LLP>"}}
}

var (
	liveAdminCred    = &credential.Credential{ID: "crd_admin", Firm: "frm_hollis", Scopes: []string{"admin"}}
	sandboxAdminCred = &credential.Credential{ID: "crd_test", Firm: "frm_hollis", Scopes: []string{"admin"}, Sandbox: true}
	readerCred       = &credential.Credential{ID: "crd_read", Firm: "frm_hollis", Scopes: []string{"clients:read", "webhooks:write"}}
)

type answer struct {
	code   int
	body   string
	header http.Header
	Error  struct{ Code, Message, Param string }
}

func do(t *testing.T, h *Handler, cred *credential.Credential, method, path, body string, header ...string) answer {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	if cred != nil {
		r = r.WithContext(auth.WithCredential(r.Context(), cred))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r, nil)
	a := answer{code: w.Code, body: w.Body.String(), header: w.Header()}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		var e struct {
			Error *struct{ Code, Message, Param string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, w.Body)
		}
		if e.Error != nil {
			a.Error = *e.Error
		}
	}
	return a
}

// Connections are the firm's real systems: only a live credential with
// the admin scope reaches them, on every route.
func TestConnectionRoutesNeedALiveAdmin(t *testing.T) {
	h := connectionHandler(t, newFakeConnections())
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/v1/connections", ""},
		{"POST", "/v1/connections", `{"role":"ledger","system":"xero"}`},
		{"GET", "/v1/connections/con_1", ""},
		{"PATCH", "/v1/connections/con_1", `{"tenant_id":"t1"}`},
		{"DELETE", "/v1/connections/con_1", ""},
	} {
		for _, tt := range []struct {
			cred *credential.Credential
			code int
			err  string
		}{
			{nil, 401, "unauthenticated"},
			{readerCred, 403, "insufficient_scope"},
			{sandboxAdminCred, 403, "insufficient_scope"},
		} {
			got := do(t, h, tt.cred, rt.method, rt.path, rt.body)
			if got.code != tt.code || got.Error.Code != tt.err {
				t.Errorf("%s %s as %v: %d %s, want %d %s", rt.method, rt.path, tt.cred, got.code, got.body, tt.code, tt.err)
			}
		}
	}
	if got := do(t, h, sandboxAdminCred, "GET", "/v1/connections", ""); !strings.Contains(got.Error.Message, "live credential") {
		t.Errorf("a sandbox refusal should say a live credential is needed: %s", got.body)
	}
}

func TestConnectingXeroThroughItsConsentPage(t *testing.T) {
	svc := newFakeConnections()
	h := connectionHandler(t, svc)
	got := do(t, h, liveAdminCred, "POST", "/v1/connections", `{"role":"ledger","system":"xero"}`, "Idempotency-Key", "k1")
	var con Connection
	if err := json.Unmarshal([]byte(got.body), &con); err != nil || got.code != http.StatusCreated {
		t.Fatalf("create: %d %s", got.code, got.body)
	}
	if con.Object != "connection" || con.Status != connection.Pending || con.AuthorizeURL == "" || con.Firm != "frm_hollis" {
		t.Fatalf("create answered %+v", con)
	}
	// A retry with the same key replays the first answer, the same
	// connection, without its start link: a link is given once.
	again := do(t, h, liveAdminCred, "POST", "/v1/connections", `{"role":"ledger","system":"xero"}`, "Idempotency-Key", "k1")
	var replayed Connection
	if err := json.Unmarshal([]byte(again.body), &replayed); err != nil || again.code != http.StatusCreated || svc.calls != 1 ||
		replayed.ID != con.ID || replayed.Status != connection.Pending || replayed.AuthorizeURL != "" ||
		again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("idempotent retry: %d %s after %d connects", again.code, again.body, svc.calls)
	}
	token := strings.TrimPrefix(con.AuthorizeURL, "https://gw.example/connect/start/")

	// The start link sets the browser's cookie and sends it to the vendor.
	started := do(t, h, nil, "GET", "/connect/start/"+token, "", "Accept", "text/html")
	cookie := (&http.Response{Header: started.header}).Cookies()
	if started.code != http.StatusFound || len(cookie) != 1 || cookie[0].Name != connect.BrowserCookie ||
		started.header.Get("Cache-Control") != "no-store" || started.header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("start: %d %v", started.code, started.header)
	}
	u, _ := url.Parse(started.header.Get("Location"))
	state := u.Query().Get("state")
	if u.Host != "login.example" || state == "" {
		t.Fatalf("start sends the browser to %s", u)
	}
	// Opened again, the link is refused: to a browser a page, else JSON.
	if again := do(t, h, nil, "GET", "/connect/start/"+token, "", "Accept", "text/html"); again.code != http.StatusBadRequest ||
		!strings.Contains(again.body, "invalid_state") || again.header.Get("Location") != "" {
		t.Fatalf("start link opened twice: %d %s", again.code, again.body)
	}
	if again := do(t, h, nil, "GET", "/connect/start/"+token, ""); again.code != http.StatusBadRequest || again.Error.Code != "invalid_state" {
		t.Fatalf("start link opened twice: %d %s", again.code, again.body)
	}
	cb := "/connect/callback?code=SECRETCODE&state=" + state
	// Another browser, or none, is refused, and the consent waits.
	for _, jar := range []string{"", connect.BrowserCookie + "=another-browser"} {
		if other := do(t, h, nil, "GET", cb, "", "Cookie", jar); other.code != http.StatusBadRequest || other.Error.Code != "invalid_state" {
			t.Fatalf("callback from another browser (%q): %d %s", jar, other.code, other.body)
		}
	}
	browser := "Cookie"
	page := do(t, h, nil, "GET", cb, "", "Accept", "text/html,application/xhtml+xml;q=0.9", browser, cookie[0].String())
	if page.code != http.StatusOK || !strings.Contains(page.body, "Xero is connected for Hollis &amp; Vane &lt;LLP&gt;") {
		t.Fatalf("callback page: %d %s", page.code, page.body)
	}
	if strings.Contains(page.body, "SECRETCODE") || strings.Contains(page.body, state) {
		t.Fatalf("the callback page shows the code or state: %s", page.body)
	}
	if !strings.Contains(page.body, `href="/console/systems"`) {
		t.Errorf("the callback page does not link to Systems: %s", page.body)
	}

	// The state was spent: a replay is refused, to a browser and to JSON.
	replay := do(t, h, nil, "GET", cb, "", browser, cookie[0].String())
	if replay.code != http.StatusBadRequest || replay.Error.Code != "invalid_state" || replay.Error.Param != "state" {
		t.Fatalf("replayed state: %d %s", replay.code, replay.body)
	}
	replayPage := do(t, h, nil, "GET", cb, "", "Accept", "text/html")
	if replayPage.code != http.StatusBadRequest || !strings.Contains(replayPage.body, "invalid_state") ||
		strings.Contains(replayPage.body, "SECRETCODE") {
		t.Fatalf("replayed state to a browser: %d %s", replayPage.code, replayPage.body)
	}

	list := do(t, h, liveAdminCred, "GET", "/v1/connections", "")
	var l struct {
		Object     string
		Data       []Connection
		HasMore    bool    `json:"has_more"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(list.body), &l); err != nil || list.code != 200 {
		t.Fatalf("list: %d %s", list.code, list.body)
	}
	if l.Object != "list" || len(l.Data) != 1 || l.Data[0].Status != connection.Connected || l.Data[0].Object != "connection" ||
		l.HasMore || l.NextCursor != nil || !strings.Contains(list.body, `"next_cursor":null`) {
		t.Fatalf("list: %s", list.body)
	}
	one := do(t, h, liveAdminCred, "GET", "/v1/connections/"+con.ID, "")
	if one.code != 200 || !strings.Contains(one.body, `"tenant_name":"Demo Company (UK)"`) {
		t.Fatalf("get: %d %s", one.code, one.body)
	}
	del := do(t, h, liveAdminCred, "DELETE", "/v1/connections/"+con.ID, "")
	if del.code != 200 || !strings.Contains(del.body, `"status":"disconnected"`) {
		t.Fatalf("delete: %d %s", del.code, del.body)
	}
}

func TestCallbackRefusals(t *testing.T) {
	svc := newFakeConnections()
	h := connectionHandler(t, svc)
	con, _ := svc.Connect(context.Background(), "frm_hollis", connection.Request{Role: "ledger", System: "xero"})
	state, cookie := startConsent(t, h, con)
	for _, tt := range []struct {
		query, code string
		status      int
	}{
		{"code=c", "invalid_state", 400},
		{"code=c&state=forged", "invalid_state", 400},
		{"error=access_denied&state=" + state, "consent_denied", 400},
		// The refusal spent the state.
		{"code=c&state=" + state, "invalid_state", 400},
	} {
		got := do(t, h, nil, "GET", "/connect/callback?"+tt.query, "", "Cookie", cookie)
		if got.code != tt.status || got.Error.Code != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.query, got.code, got.body, tt.status, tt.code)
		}
	}
	con, _ = svc.Connect(context.Background(), "frm_hollis", connection.Request{Role: "ledger", System: "xero"})
	state, cookie = startConsent(t, h, con)
	got := do(t, h, nil, "GET", "/connect/callback?error=server_error&state="+state, "", "Cookie", cookie)
	if got.code != http.StatusBadGateway || got.Error.Code != "upstream_unavailable" {
		t.Errorf("a vendor's error: %d %s, want 502", got.code, got.body)
	}
	for _, token := range []string{"start_unknown", "start_1"} {
		if got := do(t, h, nil, "GET", "/connect/start/"+token, ""); got.code != http.StatusBadRequest || got.Error.Code != "invalid_state" {
			t.Errorf("start link %s: %d %s, want 400 invalid_state", token, got.code, got.body)
		}
	}
}

// startConsent opens con's start link as a browser: the state the vendor
// is sent and the Cookie header the browser then sends.
func startConsent(t *testing.T, h *Handler, con connection.View) (state, cookie string) {
	t.Helper()
	_, token, _ := strings.Cut(con.AuthorizeURL, "/connect/start/")
	got := do(t, h, nil, "GET", "/connect/start/"+token, "")
	cookies := (&http.Response{Header: got.header}).Cookies()
	u, err := url.Parse(got.header.Get("Location"))
	if got.code != http.StatusFound || len(cookies) != 1 || err != nil {
		t.Fatalf("start: %d %v %s", got.code, got.header, got.body)
	}
	return u.Query().Get("state"), cookies[0].Name + "=" + cookies[0].Value
}

// Bodies are read as strictly as every other write's, and a connection
// names a system its role takes.
func TestConnectionBodiesAreStrict(t *testing.T) {
	svc := newFakeConnections()
	h := connectionHandler(t, svc)
	con, _ := svc.Connect(context.Background(), "frm_hollis", connection.Request{Role: "ledger", System: "xero"})
	for _, tt := range []struct {
		method, body, code, param string
	}{
		{"POST", `{"role":"ledger","system":"xero","tenant_id":"t"}`, "parameter_unknown", "tenant_id"},
		{"POST", `{"role":"ledger","System":"xero"}`, "parameter_unknown", "System"},
		{"POST", `{"role":1,"system":"xero"}`, "parameter_invalid", "role"},
		{"POST", `{"system":"xero"}`, "parameter_missing", "role"},
		{"POST", `{"role":"ledger"}`, "parameter_missing", "system"},
		{"POST", `{"role":"payroll","system":"xero"}`, "parameter_invalid", "role"},
		{"POST", `{"role":"ledger","system":"xpm"}`, "parameter_invalid", "system"},
		{"POST", `{"role":"records","system":"karbon"}`, "parameter_missing", "access_key"},
		{"POST", `{"role":"ledger","system":"xero","access_key":"k"}`, "parameter_invalid", "access_key"},
		{"PATCH", `{}`, "parameter_missing", "tenant_id"},
		{"PATCH", `{"tenant_id":"t","reconnect":true}`, "parameter_invalid", "reconnect"},
		{"PATCH", `{"reconnect":false}`, "parameter_invalid", "reconnect"},
		{"PATCH", `{"reconnect":"yes"}`, "parameter_invalid", "reconnect"},
		{"PATCH", `{"tenant_id":""}`, "parameter_invalid", "tenant_id"},
		{"PATCH", `{"tenant_id":"t","access_key":"k"}`, "parameter_invalid", "access_key"},
		{"PATCH", `{"role":"ledger"}`, "parameter_unknown", "role"},
	} {
		path := "/v1/connections"
		if tt.method == "PATCH" {
			path += "/" + con.ID
		}
		got := do(t, h, liveAdminCred, tt.method, path, tt.body)
		if got.code != 400 || got.Error.Code != tt.code || got.Error.Param != tt.param {
			t.Errorf("%s %s: %d %s, want 400 %s (param %q)", tt.method, tt.body, got.code, got.body, tt.code, tt.param)
		}
	}
	if svc.calls != 1 {
		t.Errorf("a refused body reached the service: %d connects", svc.calls)
	}
	key := "kbn_live_f00d"
	got := do(t, h, liveAdminCred, "POST", "/v1/connections", `{"role":"records","system":"karbon","access_key":"`+key+`"}`)
	if got.code != http.StatusCreated || !strings.Contains(got.body, `"status":"connected"`) || strings.Contains(got.body, key) {
		t.Errorf("karbon: %d %s", got.code, got.body)
	}
	chosen := do(t, h, liveAdminCred, "PATCH", "/v1/connections/"+con.ID, `{"tenant_id":"t2"}`)
	if chosen.code != 200 || !strings.Contains(chosen.body, `"tenant_id":"t2"`) {
		t.Errorf("choose: %d %s", chosen.code, chosen.body)
	}
}

// What the service refuses answers the contract's error, never a 500.
func TestConnectionServiceErrorsAnswerTheContract(t *testing.T) {
	svc := newFakeConnections()
	h := connectionHandler(t, svc)
	for _, tt := range []struct {
		err    error
		status int
		code   string
	}{
		{connection.ErrVersion, 409, "conflict"},
		{practice.ErrConflict, 409, "conflict"},
		{practice.ErrBadUpstream, 502, "upstream_unavailable"},
		{practice.ErrUnavailable, 503, "upstream_unavailable"},
	} {
		svc.err = tt.err
		got := do(t, h, liveAdminCred, "POST", "/v1/connections", `{"role":"ledger","system":"xero"}`)
		if got.code != tt.status || got.Error.Code != tt.code {
			t.Errorf("%v: %d %s, want %d %s", tt.err, got.code, got.body, tt.status, tt.code)
		}
	}
	svc.err = nil
	for _, path := range []string{"/v1/connections/con_nope", "/v1/connections/we_1"} {
		got := do(t, h, liveAdminCred, "GET", path, "")
		if got.code != 404 || got.Error.Code != "resource_not_found" || got.Error.Param != "id" {
			t.Errorf("%s: %d %s", path, got.code, got.body)
		}
	}
	if got := do(t, h, liveAdminCred, "GET", "/v1/connections?limit=5", ""); got.code != 400 || got.Error.Code != "parameter_unknown" {
		t.Errorf("a query on the list: %d %s", got.code, got.body)
	}
}

// A gateway with no connect block says so in the contract's body on
// every connection route, the callback included.
func TestNoConnectionServiceIsAClearError(t *testing.T) {
	h := connectionHandler(t, nil)
	h.connections = nil
	for _, rt := range []struct {
		method, path, body string
		cred               *credential.Credential
	}{
		{"GET", "/v1/connections", "", liveAdminCred},
		{"POST", "/v1/connections", `{"role":"ledger","system":"xero"}`, liveAdminCred},
		{"GET", "/connect/callback?state=s&code=c", "", nil},
	} {
		got := do(t, h, rt.cred, rt.method, rt.path, rt.body)
		if got.code != 404 || got.Error.Code != "resource_not_found" || got.Error.Message == "" {
			t.Errorf("%s %s: %d %s", rt.method, rt.path, got.code, got.body)
		}
	}
}

// The document describes the connection routes as they answer: the admin
// scope, the bodies and their required fields, the statuses, the list
// envelope and the callback's refusals.
func TestOpenAPIDescribesConnections(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct{ Schemas map[string]json.RawMessage }
	}
	if err := json.Unmarshal(servedDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	type op struct {
		Security    []map[string][]string
		RequestBody struct {
			Content map[string]struct{ Schema map[string]string }
		}
		Responses map[string]struct{ Description string }
	}
	get := func(path, method string) op {
		var o op
		if err := json.Unmarshal(doc.Paths[path][method], &o); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return o
	}
	for _, rt := range [][2]string{{"/v1/connections", "get"}, {"/v1/connections", "post"}, {"/v1/connections/{id}", "get"},
		{"/v1/connections/{id}", "patch"}, {"/v1/connections/{id}", "delete"}} {
		o := get(rt[0], rt[1])
		if len(o.Security) != 1 || len(o.Security[0]["bearer"]) != 1 || o.Security[0]["bearer"][0] != "admin" {
			t.Errorf("%s %s: security %v, want the admin scope", rt[1], rt[0], o.Security)
		}
		for _, st := range []string{"401", "403", "409", "502", "503"} {
			if _, ok := o.Responses[st]; !ok {
				t.Errorf("%s %s documents no %s", rt[1], rt[0], st)
			}
		}
	}
	if s := get("/v1/connections", "post").RequestBody.Content["application/json"].Schema["$ref"]; s != "#/components/schemas/ConnectionCreate" {
		t.Errorf("create body: %s", s)
	}
	cb := get("/connect/callback", "get")
	if cb.Security == nil || len(cb.Security) != 0 || !strings.Contains(cb.Responses["400"].Description, "invalid_state") ||
		!strings.Contains(cb.Responses["400"].Description, "consent_denied") {
		t.Errorf("callback: %+v", cb)
	}
	for name, want := range map[string][]string{
		"ConnectionCreate": {`"required":["role","system"]`, `"enum":["records","ledger","documents"]`},
		"Connection": {`"enum":["pending","choose_tenant","connected","needs_reconnect","disconnected"]`,
			`"object":{"const":"connection"`, `"authorize_url"`, `"last_success_at"`, `"choices"`},
		"ConnectionList": {`"enum":["list"]`, `"has_more"`, `"next_cursor"`},
		"SyncState":      {`"confirmed_at"`, `"progress"`},
	} {
		var compact bytes.Buffer
		if err := json.Compact(&compact, doc.Components.Schemas[name]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, w := range want {
			if !strings.Contains(compact.String(), w) {
				t.Errorf("schema %s lacks %s: %s", name, w, compact.String())
			}
		}
	}
}

// Whatever a caller or a vendor's redirect sends, the connection routes
// answer the contract: a 2xx, or a 4xx with the contract's body, never a
// 500; the service sees only a role that takes the system; and no page
// shows the vendor's code.
func FuzzConnectionInput(f *testing.F) {
	for _, s := range []string{`{"role":"ledger","system":"xero"}`, `{"role":"records","system":"karbon","access_key":"k"}`,
		`{"tenant_id":"t"}`, `{"reconnect":true}`, `{"reconnect":true,"access_key":""}`, `{"role":null}`, `{`, `[]`} {
		f.Add([]byte(s), "state=st_1&code=c0de")
	}
	f.Add([]byte(`{}`), "error=access_denied&state=st_1")
	f.Add([]byte(`{}`), "state=%zz")
	f.Fuzz(func(t *testing.T, body []byte, query string) {
		svc := newFakeConnections()
		h := connectionHandler(t, svc)
		con, _ := svc.Connect(context.Background(), "frm_hollis", connection.Request{Role: "ledger", System: "xero"})
		for _, rt := range [][2]string{{"POST", "/v1/connections"}, {"PATCH", "/v1/connections/" + con.ID}} {
			got := do(t, h, liveAdminCred, rt[0], rt[1], string(body))
			if got.code >= 500 || (got.code >= 300 && got.Error.Code == "") {
				t.Fatalf("%s %q: %d %s", rt[0], body, got.code, got.body)
			}
		}
		svc.mu.Lock()
		for _, c := range svc.conns {
			if !slices.Contains(connect.SystemNames(c.Role), c.System) {
				t.Fatalf("%q reached the service as %s/%s", body, c.Role, c.System)
			}
		}
		svc.mu.Unlock()
		r := httptest.NewRequest("GET", "/connect/callback", nil)
		r.URL.RawQuery = query
		r.Header.Set("Accept", "text/html")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r, nil)
		if w.Code >= 500 && w.Code != http.StatusBadGateway {
			t.Fatalf("callback %q: %d %s", query, w.Code, w.Body)
		}
		if q, err := url.ParseQuery(query); err == nil {
			if code := q.Get("code"); len(code) > 3 && strings.Contains(w.Body.String(), code) {
				t.Fatalf("callback %q shows the code: %s", query, w.Body)
			}
		}
	})
}
