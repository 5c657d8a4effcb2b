package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/store/credential"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// sharedStore is one gateway instance's handle on the Redis at srv; with
// empty, the Redis is emptied first, so the test starts clean.
func sharedStore(t *testing.T, srv *redistest.Server, secrets *sealed.Key, empty bool) *redisstore.Store {
	t.Helper()
	rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	if empty {
		if err := rdb.FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func registry(t *testing.T, st *redisstore.Store, now func() time.Time) *auth.Registry {
	t.Helper()
	ring, err := auth.NewKeyring(credential.SigningKey{ID: "k1", Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	r := auth.NewRegistry(st, ring, auth.RegistryConfig{FlushEvery: time.Hour, Clock: now})
	t.Cleanup(func() { r.Close() })
	return r
}

// Two gateway instances on one Redis, the second's clock ten minutes
// behind: a credential revoked on the first is refused on the second
// within a second; and once Redis is gone, a third instance that never saw
// a credential still authorizes it from its token.
func TestInstancesShareRevocationsAndNeedNoStore(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	secrets, _ := sealed.Random()
	a := registry(t, sharedStore(t, srv, secrets, true), nil)
	b := registry(t, sharedStore(t, srv, secrets, false), func() time.Time { return time.Now().Add(-10 * time.Minute) })
	c := registry(t, sharedStore(t, srv, secrets, false), nil)

	gone, goneToken, err := a.Issue(ctx, auth.IssueRequest{Firm: "frm_acme", Name: "gone", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	_, keptToken, err := a.Issue(ctx, auth.IssueRequest{Firm: "frm_acme", Name: "kept", Scopes: []string{"clients:read"}, RateLimit: "10/s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(ctx, goneToken); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Revoke(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for _, r := range []*auth.Registry{b, c} {
		eventually.True(t, time.Second-time.Since(revoked), 10*time.Millisecond, "the revocation seen by another instance within a second", func() bool {
			_, err := r.Authenticate(ctx, goneToken)
			return err != nil
		})
	}

	srv.Kill()
	got, err := c.Authenticate(ctx, keptToken)
	if err != nil {
		t.Fatalf("a never-seen credential with Redis gone: %v", err)
	}
	if !got.Allows("clients:read") || got.RateLimit != "10/s" || got.Firm != "frm_acme" {
		t.Fatalf("authorized as %+v", got)
	}
	if _, err := c.Authenticate(ctx, goneToken); err == nil {
		t.Fatal("a revoked credential authorized with Redis gone")
	}
}
