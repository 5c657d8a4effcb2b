package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/recordindex"
	"github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/credential"
)

// modelSystems serves every kind from one firm's read model.
type modelSystems struct{ m *readmodel.Model }

func (s modelSystems) Systems(practice.Tenant) (Systems, bool) { return s, true }
func (s modelSystems) Reader(practice.Kind) practice.Reader    { return s.m }
func (modelSystems) Clients() practice.ClientWriter            { return nil }
func (modelSystems) Jobs() practice.JobWriter                  { return nil }

var tombEpoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func clientAt(id string, minute, version int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"client","name":"Ann","status":"active","owner":"usr_1","updated_at":%q,"version":%d}`,
		id, tombEpoch.Add(time.Duration(minute)*time.Minute).Format(time.RFC3339), version))
}

// tombstoneServer serves /v1 over a firm's read model in a bbolt file,
// which keeps tombstones, to a live credential that reads clients.
func tombstoneServer(t *testing.T) (*readmodel.Model, *httptest.Server) {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.NoSync = true // a test file: durability is not what is tested
	secrets, _ := sealed.Random()
	st, err := bolt.New(db, nil, bolt.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	model := readmodel.New(readmodel.Config{Firm: "frm_acme", Store: st.ReadModel()})
	model.Serve(practice.Clients, nil)
	if err := model.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{logger: zap.NewNop(), metrics: m, tenants: modelSystems{model}, cursors: cursors{key: []byte("shared")}}
	cred := &credential.Credential{ID: "crd_1", Firm: "frm_acme", Scopes: []string{"clients:read"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithCredential(r.Context(), cred)), nil)
	}))
	t.Cleanup(srv.Close)
	return model, srv
}

type listAnswer struct {
	status int
	Data   []map[string]any
	More   bool   `json:"has_more"`
	Next   string `json:"next_cursor"`
	Error  struct{ Code, Param string }
}

func listClients(t *testing.T, srv *httptest.Server, query string) listAnswer {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/clients?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a listAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	a.status = resp.StatusCode
	return a
}

// pageIDs pages a query to its end and returns the ids answered, marking
// tombstones with a "-" in front; between pages it calls between.
func pageIDs(t *testing.T, srv *httptest.Server, query string, between func()) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		a := listClients(t, srv, q)
		if a.status != http.StatusOK || pages > 100 {
			t.Fatalf("%s: %d %+v", q, a.status, a.Error)
		}
		for _, item := range a.Data {
			id := item["id"].(string)
			if item["deleted"] == true {
				id = "-" + id
			}
			ids = append(ids, id)
		}
		if !a.More {
			return ids
		}
		cursor = a.Next
		if between != nil {
			between()
		}
	}
}

func TestListIncludeDeleted(t *testing.T) {
	model, srv := tombstoneServer(t)
	ctx := context.Background()
	var us []readmodel.Update
	for i := range 10 {
		id := fmt.Sprintf("cli_%02d", i)
		us = append(us, readmodel.Update{Kind: practice.Clients, ID: id, Raw: clientAt(id, i, 3)})
	}
	if err := model.Apply(ctx, us); err != nil {
		t.Fatal(err)
	}
	removedAt := tombEpoch.Add(time.Hour + 500*time.Millisecond)
	if err := model.Apply(ctx, []readmodel.Update{
		{Kind: practice.Clients, ID: "cli_03", At: removedAt},
		{Kind: practice.Clients, ID: "cli_07", At: removedAt.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}

	if got := pageIDs(t, srv, "limit=3", nil); len(got) != 8 || slices.ContainsFunc(got, func(id string) bool { return id[0] == '-' }) {
		t.Fatalf("without include_deleted: %v", got)
	}
	want := []string{"cli_00", "cli_01", "cli_02", "-cli_03", "cli_04", "cli_05", "cli_06", "-cli_07", "cli_08", "cli_09"}
	for _, limit := range []int{1, 2, 3, 4, 10, 200} {
		if got := pageIDs(t, srv, fmt.Sprintf("include_deleted=true&limit=%d", limit), nil); !slices.Equal(got, want) {
			t.Fatalf("include_deleted, limit %d:\n%v\nwant\n%v", limit, got, want)
		}
	}
	if got := pageIDs(t, srv, "include_deleted=false&limit=4", nil); len(got) != 8 {
		t.Fatalf("include_deleted=false: %v", got)
	}
	// The tombstone is exactly the contract's.
	a := listClients(t, srv, "include_deleted=true&limit=4")
	tomb, _ := json.Marshal(a.Data[3])
	if string(tomb) != `{"deleted":true,"deleted_at":"2026-03-02T10:00:00.5Z","id":"cli_03","object":"client","version":4}` {
		t.Fatalf("tombstone %s", tomb)
	}
	// updated_since: records updated and tombstones deleted at or after it.
	since := url.QueryEscape(tombEpoch.Add(5 * time.Minute).Format(time.RFC3339))
	if got := pageIDs(t, srv, "include_deleted=true&limit=2&updated_since="+since, nil); !slices.Equal(got, []string{"-cli_03", "cli_05", "cli_06", "-cli_07", "cli_08", "cli_09"}) {
		t.Fatalf("with updated_since: %v", got)
	}
	since = url.QueryEscape(removedAt.Add(time.Minute).Format(time.RFC3339))
	if got := pageIDs(t, srv, "include_deleted=true&updated_since="+since, nil); !slices.Equal(got, []string{"-cli_07"}) {
		t.Fatalf("with updated_since after the first removal: %v", got)
	}
	// A record back drops its tombstone.
	if err := model.Apply(ctx, []readmodel.Update{{Kind: practice.Clients, ID: "cli_07", Raw: clientAt("cli_07", 200, 5)}}); err != nil {
		t.Fatal(err)
	}
	if got := pageIDs(t, srv, "include_deleted=true&limit=3", nil); !slices.Contains(got, "cli_07") || slices.Contains(got, "-cli_07") {
		t.Fatalf("after cli_07 came back: %v", got)
	}
}

func TestListIncludeDeletedRefusals(t *testing.T) {
	_, srv := tombstoneServer(t)
	for _, tc := range []struct{ query, code, param string }{
		{"include_deleted=yes", "parameter_invalid", "include_deleted"},
		{"include_deleted=", "parameter_invalid", "include_deleted"},
		{"include_deleted=true&include_deleted=true", "parameter_invalid", "include_deleted"},
		{"include_deleted=true&owner=usr_1", "parameter_invalid", "include_deleted"},
		{"include_deleted=true&status=active", "parameter_invalid", "include_deleted"},
		{"include_deleted=true&updated_since=yesterday", "parameter_invalid", "updated_since"},
	} {
		a := listClients(t, srv, tc.query)
		if a.status != http.StatusBadRequest || a.Error.Code != tc.code || a.Error.Param != tc.param {
			t.Errorf("%s: %d %+v, want 400 %s %s", tc.query, a.status, a.Error, tc.code, tc.param)
		}
	}
	// A cursor is bound to include_deleted, as to any filter.
	model, srv2 := tombstoneServer(t)
	if err := model.Apply(context.Background(), []readmodel.Update{
		{Kind: practice.Clients, ID: "cli_1", Raw: clientAt("cli_1", 0, 1)},
		{Kind: practice.Clients, ID: "cli_2", Raw: clientAt("cli_2", 0, 1)},
	}); err != nil {
		t.Fatal(err)
	}
	plain := listClients(t, srv2, "limit=1")
	if a := listClients(t, srv2, "include_deleted=true&limit=1&cursor="+url.QueryEscape(plain.Next)); a.status != http.StatusBadRequest || a.Error.Code != "invalid_cursor" {
		t.Fatalf("a cursor of a page without include_deleted: %d %+v", a.status, a.Error)
	}
}

// recordsOnly serves a collection with no tombstones, as the demo records
// do: include_deleted=true answers its records alone.
type recordsOnly struct{ col recordindex.Collection }

func (s recordsOnly) Systems(practice.Tenant) (Systems, bool) { return s, true }
func (s recordsOnly) Reader(practice.Kind) practice.Reader    { return s }
func (recordsOnly) Clients() practice.ClientWriter            { return nil }
func (recordsOnly) Jobs() practice.JobWriter                  { return nil }
func (s recordsOnly) List(_ context.Context, _ practice.Tenant, _ practice.Kind, q practice.Query) (practice.Page, error) {
	return s.col.Page(q, q.Limit), nil
}
func (recordsOnly) Get(context.Context, practice.Tenant, practice.Kind, string) (json.RawMessage, error) {
	return nil, practice.ErrNotFound
}

func TestListIncludeDeletedWithoutTombstones(t *testing.T) {
	var entries []recordindex.Entry
	for i := range 5 {
		e, err := recordindex.NewEntry(clientAt(fmt.Sprintf("cli_%d", i), i, 1))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{logger: zap.NewNop(), metrics: m, tenants: recordsOnly{recordindex.Sorted(entries)}, cursors: cursors{key: []byte("shared")}}
	cred := &credential.Credential{ID: "crd_1", Firm: "frm_acme", Sandbox: true, Scopes: []string{"clients:read"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithCredential(r.Context(), cred)), nil)
	}))
	t.Cleanup(srv.Close)
	if got := pageIDs(t, srv, "include_deleted=true&limit=2", nil); !slices.Equal(got, []string{"cli_0", "cli_1", "cli_2", "cli_3", "cli_4"}) {
		t.Fatalf("include_deleted over records without tombstones: %v", got)
	}
}

// TestListIncludeDeletedUnderChange pages with include_deleted while a
// seeded schedule removes, brings back and adds clients between pages,
// and checks every schedule: ids strictly increase (nothing repeated),
// and every client that existed before paging began is answered once, as
// a record or a tombstone, since a client once written is always one or
// the other.
func TestListIncludeDeletedUnderChange(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		model, srv := tombstoneServer(t)
		ctx := context.Background()
		rnd := rand.New(rand.NewPCG(seed, 7))
		var us []readmodel.Update
		version := map[string]int{}
		for i := range 40 {
			id := fmt.Sprintf("cli_%03d", i*2)
			version[id] = 1
			us = append(us, readmodel.Update{Kind: practice.Clients, ID: id, Raw: clientAt(id, i, 1)})
		}
		if err := model.Apply(ctx, us); err != nil {
			t.Fatal(err)
		}
		before := map[string]bool{}
		for id := range version {
			before[id] = true
		}
		step := 0
		change := func() {
			for range 1 + rnd.IntN(4) {
				step++
				id := fmt.Sprintf("cli_%03d", rnd.IntN(80))
				u := readmodel.Update{Kind: practice.Clients, ID: id, At: tombEpoch.Add(time.Duration(step) * time.Minute)}
				if rnd.IntN(2) == 0 {
					version[id]++
					u.Raw = clientAt(id, 100+step, version[id])
				}
				if err := model.Apply(ctx, []readmodel.Update{u}); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := pageIDs(t, srv, fmt.Sprintf("include_deleted=true&limit=%d", 1+rnd.IntN(7)), change)
		seen := map[string]bool{}
		last := ""
		for _, id := range got {
			bare := strings.TrimPrefix(id, "-")
			if bare <= last {
				t.Fatalf("seed %d: %s after %s: ids not increasing in %v", seed, bare, last, got)
			}
			last, seen[bare] = bare, true
		}
		for id := range before {
			if !seen[id] {
				t.Fatalf("seed %d: %s, there before paging began, was never answered: %v", seed, id, got)
			}
		}
	}
}
