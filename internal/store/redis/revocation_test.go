package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
	redisstore "github.com/practicegw/practicegw/internal/store/redis"
)

func registry(t *testing.T, st *redisstore.Store, now func() time.Time) *auth.Registry {
	t.Helper()
	ring, err := auth.NewKeyring(auth.SigningKey{ID: "k1", Secret: []byte(strings.Repeat("k", 32))})
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
	a := registry(t, open(t, srv), nil)
	b := registry(t, another(t, srv), func() time.Time { return time.Now().Add(-10 * time.Minute) })
	c := registry(t, another(t, srv), nil)

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

// A follower whose position the feed trimmed away is told so, rather than
// skipping what was trimmed.
func TestRevocationFeedReportsTrimmedPosition(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	st := open(t, srv)
	_, pos, err := st.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"crd_1", "crd_2", "crd_3"} {
		if err := st.SaveCredential(ctx, &auth.Credential{ID: id, Firm: "frm_a", RevokedAt: &now}); err != nil {
			t.Fatal(err)
		}
	}
	_, first, err := st.RevokedAfter(ctx, pos)
	if err != nil {
		t.Fatal(err)
	}
	rdb := client(t, srv)
	if err := rdb.XTrimMaxLen(ctx, "pgw:cred:revocations", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.RevokedAfter(ctx, pos); !errors.Is(err, auth.ErrFeedGap) {
		t.Fatalf("following from before the trimmed entries: %v, want ErrFeedGap", err)
	}
	if ids, _, err := st.RevokedAfter(ctx, first); err != nil || len(ids) != 0 {
		t.Fatalf("following from the newest entry: %v (%v), want nothing and no gap", ids, err)
	}
}
