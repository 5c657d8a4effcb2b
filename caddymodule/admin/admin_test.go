package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/firms"
	"github.com/practicegw/practicegw/practice"

	"github.com/caddyserver/caddy/v2"
	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

// savedCheckpoints is the embedded read model store, noting the names of
// the checkpoints saved: a resync is one, for the sync's holder to find.
type savedCheckpoints struct {
	*bolt.ReadModel
	mu    sync.Mutex
	names []string
}

func (s *savedCheckpoints) SaveCheckpoint(ctx context.Context, name string, value []byte) error {
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	return s.ReadModel.SaveCheckpoint(ctx, name, value)
}

func (s *savedCheckpoints) saved() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

// gateway is the practicegw app as the admin routes see it, made of the
// parts the app wires: the firms' runtime, and no registry, limiter,
// sandbox or connection service.
type gateway struct {
	*firms.Runtime
}

func (gateway) Credentials() *auth.Registry { return nil }

func (gateway) Traffic(context.Context, *credential.Credential, time.Time) (usage.Traffic, bool, error) {
	return usage.Traffic{}, false, nil
}

func (gateway) Trigger(context.Context, string, string) (adminapi.Triggered, error) {
	return adminapi.Triggered{}, errors.New("no sandbox")
}

func (gateway) Readiness(context.Context) []health.Check { return nil }

func (gateway) Connections() api.ConnectionService { return nil }

// karbonRecords is a records system that says it is Karbon and reads
// nothing: its sync is made, and never run.
type karbonRecords struct{}

func (karbonRecords) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "practicegw.systems.records.karbon", New: func() caddy.Module { return karbonRecords{} }}
}

func (karbonRecords) Open(firmsystem.Deps) (firmsystem.Opened, error) {
	return firmsystem.Opened{Label: "Karbon"}, nil
}

// syncAdminServer serves the admin routes of an app with frm_acme on
// Karbon (records) and demo records for the rest, and frm_demo on demo
// records alone. The firms' runtime is made as the app makes it, its
// syncs not run.
func syncAdminServer(t *testing.T) (*httptest.Server, *savedCheckpoints) {
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
	cp := &savedCheckpoints{ReadModel: st.ReadModel()}
	rt, err := firms.New(context.Background(), firms.Config{Holder: "test/1", Firms: []firms.Firm{
		{ID: "frm_acme", Demo: []string{"ledger", "documents"}, Systems: []firms.System{{Role: "records", Module: karbonRecords{}}}},
		{ID: "frm_demo", Demo: []string{"records", "ledger", "documents"}},
	}}, firms.Deps{Store: cp, State: st, Notices: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	app := gateway{Runtime: rt}

	mux := http.NewServeMux()
	for _, route := range (&adminAPI{app: app}).Routes() {
		mux.HandleFunc(route.Pattern, func(w http.ResponseWriter, r *http.Request) {
			// As Caddy's admin endpoint answers a handler's error.
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
	return srv, cp
}

func TestAdminSyncStatus(t *testing.T) {
	srv, _ := syncAdminServer(t)
	resp, err := http.Get(srv.URL + "/practicegw/sync/frm_acme")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Data []adminapi.SyncView `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status: %d %v", resp.StatusCode, err)
	}
	if len(got.Data) != 1 {
		t.Fatalf("frm_acme's syncs: %+v", got.Data)
	}
	v := got.Data[0]
	if v.Firm != "frm_acme" || v.Role != "records" || v.System != "karbon" || v.State != readmodel.StateBackfilling ||
		v.AgeSeconds != nil || len(v.Kinds) != len(firmsystem.KindsOf("records", firmsystem.EngagementsNone)) {
		t.Errorf("karbon's sync before its backfill: %+v", v)
	}
	if !strings.HasPrefix(v.Progress, "Karbon clients: 0") {
		t.Errorf("progress %q", v.Progress)
	}

	for path, want := range map[string]int{
		"/practicegw/sync/frm_demo":    http.StatusOK,
		"/practicegw/sync/frm_nobody":  http.StatusNotFound,
		"/practicegw/sync/":            http.StatusNotFound,
		"/practicegw/sync/frm_acme/x":  http.StatusNotFound,
		"/practicegw/sync/frm_acme/x/": http.StatusNotFound,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		if path == "/practicegw/sync/frm_demo" && strings.TrimSpace(string(body)) != `{"data":[],"roles":[{"role":"records","source":"demo"},{"role":"ledger","source":"demo"},{"role":"documents","source":"demo"}]}` {
			t.Errorf("a firm on demo records: %s", body)
		}
	}
}

func TestAdminResync(t *testing.T) {
	srv, cp := syncAdminServer(t)
	for _, system := range []string{"records", "karbon"} {
		resp, err := http.Post(srv.URL+"/practicegw/sync/frm_acme/"+system+"/resync", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		var v adminapi.SyncView
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || err != nil || v.Role != "records" || v.System != "karbon" {
			t.Fatalf("resync %s: %d %+v %v", system, resp.StatusCode, v, err)
		}
	}
	asked := 0
	for _, name := range cp.saved() {
		if strings.Contains(name, "frm_acme/records") && strings.HasSuffix(name, "resync") {
			asked++
		}
	}
	if asked != 2 {
		t.Fatalf("checkpoints saved %v, want two resyncs of frm_acme's records", cp.saved())
	}

	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/practicegw/sync/frm_acme/documents/resync", http.StatusNotFound},
		{"POST", "/practicegw/sync/frm_demo/records/resync", http.StatusNotFound},
		{"POST", "/practicegw/sync/frm_nobody/records/resync", http.StatusNotFound},
		{"GET", "/practicegw/sync/frm_acme/records/resync", http.StatusMethodNotAllowed},
		{"POST", "/practicegw/sync/frm_acme", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
	if n := len(cp.saved()); n != 2 {
		t.Fatalf("refused requests saved checkpoints: %v", cp.saved())
	}
}

// The admin route (and so `practicegw sync status`) says a sync's plan:
// of how many calls a period, its share, and how often each kind polls.
func TestSyncViewSaysThePlan(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	st := readmodel.Status{Firm: "frm_acme", Role: "records", System: "xpm", State: readmodel.StateLive, ConfirmedAt: now.Add(-time.Minute),
		Kinds: []readmodel.KindStatus{{Kind: practice.Clients, Backfilled: true}, {Kind: practice.Jobs, Backfilled: true}},
		Plan: readmodel.Plan{PollEvery: map[string]time.Duration{"clients": time.Minute, "jobs": 8 * time.Minute},
			CallsPerPeriod: 1100, Limit: 5000, Period: 24 * time.Hour, Share: 0.25}}
	v := syncViewOf(st, now)
	if v.PlanLimit != 5000 || v.PlanShare != 1250 || v.PlanPeriod != "24h0m0s" || v.PlanCalls != 1100 || v.AgeSeconds == nil || *v.AgeSeconds != 60 {
		t.Errorf("the plan's view: %+v", v)
	}
	if !strings.Contains(v.Plan, "of 5,000 calls a day, at most 1,250 for this sync") {
		t.Errorf("the plan for people: %q", v.Plan)
	}
	if len(v.Kinds) != 2 || v.Kinds[0].PollSeconds != 60 || v.Kinds[1].PollSeconds != 480 {
		t.Errorf("each kind's polls: %+v", v.Kinds)
	}
}
