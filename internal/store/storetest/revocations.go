package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/caddymodule/auth"
)

// RevocationStore is a credential store shared between gateway instances,
// which tells each what the others revoked.
type RevocationStore interface {
	auth.Store
	auth.RevocationFeed
}

// Revocations checks an auth.RevocationFeed: a credential revoked through
// one handle is in the other's feed from before its revocation time and
// not after it, and a live credential never is. open returns an empty
// store and a second handle on the same state, as another instance has.
func Revocations(t *testing.T, open func(t *testing.T) (store, other RevocationStore)) {
	ctx := context.Background()
	st, other := open(t)
	created := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	revoked := created.Add(time.Hour)
	for _, c := range []*auth.Credential{
		{ID: "cred_live", Firm: "frm_a", CreatedAt: created},
		{ID: "cred_gone", Firm: "frm_a", CreatedAt: created, RevokedAt: &revoked},
		{ID: "cred_other_firm", Firm: "frm_b", CreatedAt: created, RevokedAt: &revoked},
	} {
		if err := st.SaveCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := other.Revoked(ctx, revoked.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if want := []string{"cred_gone", "cred_other_firm"}; !slices.Equal(ids, want) {
		t.Fatalf("revoked since a minute before: %v, want %v", ids, want)
	}
	if ids, err := other.Revoked(ctx, revoked.Add(time.Minute)); err != nil || len(ids) != 0 {
		t.Fatalf("revoked since a minute after: %v (%v), want none", ids, err)
	}
}
