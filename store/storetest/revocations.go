package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/store/credential"
)

// RevocationStore is a credential store shared between gateway instances,
// which tells each what the others revoked.
type RevocationStore interface {
	SaveCredential(ctx context.Context, c *credential.Credential) error
	Credential(ctx context.Context, id string) (*credential.Credential, error)
	Credentials(ctx context.Context, firm string) ([]*credential.Credential, error)
	TouchCredentials(ctx context.Context, lastUsed map[string]time.Time) error
	Revocations(ctx context.Context) (ids []string, pos string, err error)
	RevokedAfter(ctx context.Context, pos string) (ids []string, next string, err error)
}

// Revocations checks a revocation feed (caddymodule/auth's RevocationFeed): the whole set holds every
// revoked credential, whatever time the revoking instance's clock gave it,
// and no live one; following the feed from the set's position returns each
// later revocation once, in order, from any handle; a position already
// read returns nothing new. open returns an empty store and a second
// handle on the same state, as another instance has.
func Revocations(t *testing.T, open func(t *testing.T) (store, other RevocationStore)) {
	ctx := context.Background()
	st, other := open(t)
	created := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	revoked := created.Add(time.Hour)
	// A clock an hour behind the others: it must not matter.
	behind := revoked.Add(-2 * time.Hour)

	ids, start, err := other.Revocations(ctx)
	if err != nil || len(ids) != 0 {
		t.Fatalf("an empty store's revocations: %v (%v)", ids, err)
	}
	if got, pos, err := other.RevokedAfter(ctx, start); err != nil || len(got) != 0 || pos != start {
		t.Fatalf("following an empty feed: %v at %q (%v), want nothing at %q", got, pos, err, start)
	}
	for _, c := range []*credential.Credential{
		{ID: "crd_live", Firm: "frm_a", CreatedAt: created},
		{ID: "crd_gone", Firm: "frm_a", CreatedAt: created, RevokedAt: &revoked},
		{ID: "crd_other_firm", Firm: "frm_b", CreatedAt: created, RevokedAt: &behind},
	} {
		if err := st.SaveCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	ids, pos, err := other.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if want := []string{"crd_gone", "crd_other_firm"}; !slices.Equal(ids, want) {
		t.Fatalf("revocations %v, want %v", ids, want)
	}
	got, next, err := other.RevokedAfter(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"crd_gone", "crd_other_firm"}; !slices.Equal(got, want) {
		t.Fatalf("following from before: %v, want %v in the order revoked", got, want)
	}
	if next != pos {
		t.Fatalf("following ends at %q, the whole set was read at %q", next, pos)
	}
	if got, again, err := other.RevokedAfter(ctx, next); err != nil || len(got) != 0 || again != next {
		t.Fatalf("following from the end: %v at %q (%v), want nothing", got, again, err)
	}

	later := revoked.Add(time.Minute)
	if err := other.SaveCredential(ctx, &credential.Credential{ID: "crd_live", Firm: "frm_a", CreatedAt: created, RevokedAt: &later}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.RevokedAfter(ctx, next); err != nil || !slices.Equal(got, []string{"crd_live"}) {
		t.Fatalf("the first handle follows the second's revocation: %v (%v)", got, err)
	}
}
