package gateway

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

	"github.com/caddyserver/caddy/v2"
	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/internal/adminapi"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/bolt"
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

// syncAdminServer serves the admin routes of an app with frm_acme on
// Karbon (records) and demo records for the rest, and frm_demo on demo
// records alone. The syncs are built as the app builds them, not run.
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
	app := &App{logger: zap.NewNop(), holder: "test/1", readStore: cp, firms: map[string]*firmBackends{}}
	acme := &Firm{ID: "frm_acme"}
	model := app.newModel(acme.ID)
	app.firms[acme.ID] = &firmBackends{model: model,
		syncs: []*readmodel.Syncer{app.syncFor(acme, "records", firmsystem.Kinds("records"), "karbon", "Karbon", model, nil, nil, nil, readmodel.SyncConfig{})}}
	app.firms["frm_demo"] = &firmBackends{}

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
		v.AgeSeconds != nil || len(v.Kinds) != len(firmsystem.Kinds("records")) {
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
		if path == "/practicegw/sync/frm_demo" && strings.TrimSpace(string(body)) != `{"data":[],"roles":[]}` {
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
