package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/store/credential"
)

// CredentialStore is what the gateway keeps of credentials: the
// registry's store (caddymodule/auth's Store, spelled out so that the
// suite imports no Caddy module) and the signing key generated when none
// is configured.
type CredentialStore interface {
	SaveCredential(ctx context.Context, c *credential.Credential) error
	Credential(ctx context.Context, id string) (*credential.Credential, error)
	Credentials(ctx context.Context, firm string) ([]*credential.Credential, error)
	TouchCredentials(ctx context.Context, lastUsed map[string]time.Time) error
	SigningKey(ctx context.Context) (credential.SigningKey, error)
}

// Credentials checks a CredentialStore. open returns an empty store; with
// reopen, a second handle on the same state, as another instance or a
// restart would have.
func Credentials(t *testing.T, open func(t *testing.T) (store, reopen CredentialStore)) {
	ctx := context.Background()
	created := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	cred := func(id, firm string) *credential.Credential {
		return &credential.Credential{ID: id, Firm: firm, Name: "sync " + id, Scopes: []string{"clients:read", "jobs:write"},
			RateLimit: "600/m", CreatedAt: created}
	}

	t.Run("save and read back", func(t *testing.T) {
		st, other := open(t)
		want := cred("crd_a", "frm_acme")
		want.Sandbox = true
		if err := st.SaveCredential(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := other.Credential(ctx, "crd_a")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.Firm != want.Firm || got.Name != want.Name || !got.Sandbox ||
			!slices.Equal(got.Scopes, want.Scopes) || got.RateLimit != want.RateLimit || !got.CreatedAt.Equal(created) ||
			got.RevokedAt != nil || got.LastUsedAt != nil {
			t.Fatalf("read back %+v, saved %+v", got, want)
		}
		if _, err := st.Credential(ctx, "crd_missing"); !errors.Is(err, credential.ErrNotFound) {
			t.Fatalf("missing credential: %v, want credential.ErrNotFound", err)
		}
	})

	t.Run("a saved revocation sticks", func(t *testing.T) {
		st, other := open(t)
		c := cred("crd_r", "frm_acme")
		if err := st.SaveCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
		revoked := created.Add(time.Hour)
		c.RevokedAt = &revoked
		if err := st.SaveCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := other.Credential(ctx, "crd_r")
		if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(revoked) {
			t.Fatalf("after revoking: %+v, %v", got, err)
		}
	})

	t.Run("list by firm", func(t *testing.T) {
		st, _ := open(t)
		for _, c := range []*credential.Credential{cred("crd_1", "frm_acme"), cred("crd_2", "frm_birch"), cred("crd_3", "frm_acme")} {
			if err := st.SaveCredential(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		ids := func(firm string) []string {
			cs, err := st.Credentials(ctx, firm)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range cs {
				out = append(out, c.ID)
			}
			slices.Sort(out)
			return out
		}
		if got := ids("frm_acme"); !slices.Equal(got, []string{"crd_1", "crd_3"}) {
			t.Errorf("frm_acme lists %v", got)
		}
		if got := ids(""); !slices.Equal(got, []string{"crd_1", "crd_2", "crd_3"}) {
			t.Errorf("every firm lists %v", got)
		}
		if got := ids("frm_none"); len(got) != 0 {
			t.Errorf("a firm without credentials lists %v", got)
		}
	})

	t.Run("last used times only move forward", func(t *testing.T) {
		st, other := open(t)
		if err := st.SaveCredential(ctx, cred("crd_u", "frm_acme")); err != nil {
			t.Fatal(err)
		}
		first, later := created.Add(2*time.Hour), created.Add(5*time.Hour)
		for _, at := range []time.Time{first, later, first} {
			if err := st.TouchCredentials(ctx, map[string]time.Time{"crd_u": at, "crd_unknown": at}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := other.Credential(ctx, "crd_u")
		if err != nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(later) {
			t.Fatalf("last used %v (%v), want %v", got.LastUsedAt, err, later)
		}
		if _, err := other.Credential(ctx, "crd_unknown"); !errors.Is(err, credential.ErrNotFound) {
			t.Fatalf("touching an unknown credential created it: %v", err)
		}
	})

	t.Run("one generated signing key", func(t *testing.T) {
		st, other := open(t)
		k1, err := st.SigningKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k1.ID == "" || len(k1.Secret) < 32 {
			t.Fatalf("generated key %q has %d bytes", k1.ID, len(k1.Secret))
		}
		for _, s := range []CredentialStore{st, other} {
			k2, err := s.SigningKey(ctx)
			if err != nil || k2.ID != k1.ID || string(k2.Secret) != string(k1.Secret) {
				t.Fatalf("second look at the signing key: %q (%v), first %q", k2.ID, err, k1.ID)
			}
		}
	})
}
