package firms

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"
	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	boltstore "github.com/practicegw/practicegw/store/bolt"
)

// fakeSystem is a firm's system as a test has it: its module names the
// system (its id) and opens as what the test gives it, keeping the
// dependencies it was opened with.
type fakeSystem struct {
	id     caddy.ModuleID
	opened firmsystem.Opened
	deps   firmsystem.Deps
}

func (m *fakeSystem) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: m.id, New: func() caddy.Module { return new(fakeSystem) }}
}

func (m *fakeSystem) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	m.deps = d
	return m.opened, nil
}

// noRecords is a vendor with no records.
type noRecords struct{}

func (noRecords) List(context.Context, practice.Tenant, practice.Kind, practice.Query) (practice.Page, error) {
	return practice.Page{Items: []json.RawMessage{}}, nil
}

func (noRecords) Get(_ context.Context, _ practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	return nil, fmt.Errorf("%s %s: %w", k, id, practice.ErrNotFound)
}

// boltStore is an embedded store of the test's own.
func boltStore(t *testing.T) *boltstore.Store {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	secrets, _ := sealed.Random()
	st, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
