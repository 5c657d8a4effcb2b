package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// memoryConnections is a connection service double: connections kept in
// memory, each request noted, err answered when set.
type memoryConnections struct {
	mu    sync.Mutex
	conns map[string]connection.View
	asked []connection.Request
	err   error
}

func (m *memoryConnections) List(_ context.Context, firm string) ([]connection.View, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []connection.View
	for _, v := range m.conns {
		if v.Firm == firm {
			out = append(out, v)
		}
	}
	return out, m.err
}

func (m *memoryConnections) Get(_ context.Context, firm, id string) (connection.View, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.conns[id]
	if !ok || v.Firm != firm {
		return connection.View{}, connection.ErrNotFound
	}
	return v, m.err
}

func (m *memoryConnections) Connect(_ context.Context, firm string, r connection.Request) (connection.View, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, r)
	if m.err != nil {
		return connection.View{}, m.err
	}
	v := connection.View{Connection: connection.Connection{ID: "con_1", Firm: firm, Role: r.Role, System: r.System,
		Status: connection.Pending}, AuthorizeURL: "https://login.example/authorize?state=s"}
	m.conns[v.ID] = v
	return v, nil
}

func (m *memoryConnections) Update(ctx context.Context, firm, id string, r connection.Request) (connection.View, error) {
	v, err := m.Get(ctx, firm, id)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, r)
	if err != nil {
		return v, err
	}
	v.Status, v.OrganisationID = connection.Connected, r.OrganisationID
	m.conns[id] = v
	return v, nil
}

func (m *memoryConnections) Disconnect(ctx context.Context, firm, id string) (connection.View, error) {
	v, err := m.Get(ctx, firm, id)
	if err != nil {
		return v, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v.Status = connection.Disconnected
	m.conns[id] = v
	return v, nil
}

// connectAdminServer serves the connection admin routes as Caddy's admin
// endpoint does, over svc (nil: a gateway with no connect block).
func connectAdminServer(t *testing.T, svc connectionService) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	routes := connectionAdminRoutes(func() connectionService { return svc }, func(firm string) bool { return firm == "frm_hollis" })
	for _, route := range routes {
		mux.HandleFunc(route.Pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := route.Handler.ServeHTTP(w, r); err != nil {
				status := http.StatusInternalServerError
				var apiErr caddy.APIError
				if errors.As(err, &apiErr) {
					status = apiErr.HTTPStatus
				}
				http.Error(w, err.Error(), status)
			}
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func askAdmin(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminConnections(t *testing.T) {
	svc := &memoryConnections{conns: map[string]connection.View{}}
	srv := connectAdminServer(t, svc)
	const base = "/practicegw/connections/frm_hollis"

	code, body := askAdmin(t, srv, "POST", base, `{"role":"ledger","system":"xero"}`)
	var v connection.View
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &v) != nil || v.ID != "con_1" || v.AuthorizeURL == "" {
		t.Fatalf("connect: %d %s", code, body)
	}
	if code, body = askAdmin(t, srv, "GET", base+"/con_1", ""); code != 200 || !strings.Contains(body, `"status":"pending"`) {
		t.Fatalf("get: %d %s", code, body)
	}
	if code, body = askAdmin(t, srv, "GET", base, ""); code != 200 || !strings.Contains(body, `"data":[{"id":"con_1"`) {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, body = askAdmin(t, srv, "PATCH", base+"/con_1", `{"tenant_id":"t1"}`); code != 200 || !strings.Contains(body, `"tenant_id":"t1"`) {
		t.Fatalf("choose: %d %s", code, body)
	}
	if code, body = askAdmin(t, srv, "DELETE", base+"/con_1", ""); code != 200 || !strings.Contains(body, `"status":"disconnected"`) {
		t.Fatalf("disconnect: %d %s", code, body)
	}

	for _, tt := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", base + "/con_9", "", 404},
		{"DELETE", base + "/con_9", "", 404},
		{"GET", "/practicegw/connections/frm_other", "", 404},
		{"GET", "/practicegw/connections/", "", 404},
		{"GET", base + "/con_1/more", "", 404},
		{"POST", base, `{"role":"ledger","sytem":"xero"}`, 400},
		{"POST", base, `{"role":"ledger","system":"xero","tenant_id":"t"}`, 400},
		{"PATCH", base + "/con_1", `{"role":"records"}`, 400},
		{"PUT", base + "/con_1", `{}`, 405},
	} {
		if code, body := askAdmin(t, srv, tt.method, tt.path, tt.body); code != tt.status {
			t.Errorf("%s %s %s: %d %s, want %d", tt.method, tt.path, tt.body, code, body, tt.status)
		}
	}
	svc.mu.Lock()
	asked := len(svc.asked)
	svc.mu.Unlock()
	if asked != 2 {
		t.Errorf("refused requests reached the service: %d asked", asked)
	}

	// The service's refusals keep their status, the contract's sentence,
	// code and parameter apart, for the CLI to say in its flags' words;
	// an unknown firm and an unknown connection name theirs.
	for _, c := range []struct {
		err          error
		path         string
		status       int
		code, param  string
		sentenceWord string
	}{
		{practice.ErrNotConnected, base, 409, "system_not_connected", "", ""},
		{practice.Invalid("access_key", "Karbon refused the access key."), base, 400, "parameter_invalid", "access_key", "Karbon refused"},
		{nil, "/practicegw/connections/frm_other", 404, "resource_not_found", "firm", "no such firm"},
	} {
		svc.err = c.err
		code, body := askAdmin(t, srv, "POST", c.path, `{"role":"records","system":"karbon","access_key":"k"}`)
		var refusal adminapi.Refusal
		if err := json.Unmarshal([]byte(body), &refusal); err != nil || code != c.status || refusal.Code != c.code ||
			refusal.Param != c.param || !strings.Contains(refusal.Error, c.sentenceWord) || strings.HasPrefix(refusal.Error, c.code) {
			t.Errorf("%v: %d %s", c.err, code, body)
		}
	}
}

func TestAdminConnectionsWithoutAConnectBlock(t *testing.T) {
	srv := connectAdminServer(t, nil)
	code, body := askAdmin(t, srv, "GET", "/practicegw/connections/frm_hollis", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no connect block") {
		t.Errorf("%d %s", code, body)
	}
}
