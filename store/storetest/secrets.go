package storetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/store/credential"
)

// SecretStore keeps secrets: the generated signing key, and webhook
// endpoints with theirs.
type SecretStore interface {
	SigningKey(ctx context.Context) (credential.SigningKey, error)
	dispatcher.EndpointRegistry
	dispatcher.EndpointCatalog
	UpstreamState
}

// SecretsBackend is one backend's state, empty at first, as the Secrets
// suite drives it.
type SecretsBackend struct {
	// Open is a store on the state that seals under key, as a process
	// starting with that key opens it; its error is the one that process
	// would stop with.
	Open func(key *sealed.Key) (SecretStore, error)
	// Raw is every key and value the backend holds, concatenated.
	Raw func() []byte
	// WritePlain stores a generated signing key and an endpoint as the
	// version before sealing did: in plain text.
	WritePlain func(key credential.SigningKey, ep dispatcher.Endpoint)
	// UpstreamRaw is the value the backend holds for an upstream state
	// key, as stored; WriteUpstreamRaw stores one so, as the version
	// before sealing did or as someone moving values around would.
	UpstreamRaw      func(key string) []byte
	WriteUpstreamRaw func(key string, value []byte)
}

// Secrets checks that a backend keeps the generated signing key and
// endpoint secrets sealed: not in the backend's bytes, read back whole,
// refused under another key, and plain text from an earlier version read
// and sealed. fresh returns a backend with an empty state.
func Secrets(t *testing.T, fresh func(t *testing.T) SecretsBackend) {
	key, _ := sealed.Random()
	ep := func(id string) dispatcher.Endpoint {
		return dispatcher.Endpoint{ID: id, Firm: tenant.Firm, URL: "https://example.com/" + id, Events: []string{"*"},
			Status: dispatcher.EndpointEnabled, CreatedAt: t0, UpdatedAt: t0,
			Secrets: []dispatcher.Secret{{Key: "whsec_c2VjcmV0LW9mLWVuZHBvaW50LW9uZS1wcmltYXJ5IQ=="}}}
	}
	// notIn fails if raw holds a secret, as bytes or as the base64 JSON
	// gives []byte.
	notIn := func(t *testing.T, raw []byte, secrets ...[]byte) {
		t.Helper()
		if len(raw) == 0 {
			t.Fatal("the backend holds nothing")
		}
		for _, s := range secrets {
			if bytes.Contains(raw, s) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(s))) {
				t.Errorf("the backend holds %q in plain text", s)
			}
		}
	}
	open := func(t *testing.T, b SecretsBackend, k *sealed.Key) SecretStore {
		t.Helper()
		st, err := b.Open(k)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	t.Run("sealed at rest and read back", func(t *testing.T) {
		b := fresh(t)
		st := open(t, b, key)
		sk, err := st.SigningKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := ep("we_sealed")
		if err := st.CreateEndpoint(ctx, want); err != nil {
			t.Fatal(err)
		}
		rotated := dispatcher.Secret{Key: "whsec_c2Vjb25kLXNlY3JldC1hZnRlci1yb3RhdGlvbi0xMjM0NQ=="}
		until := t0.Add(24 * time.Hour)
		if _, err := st.UpdateEndpoint(ctx, want.ID, func(e *dispatcher.Endpoint) error {
			e.Secrets[0].ExpiresAt = &until
			e.Secrets = append([]dispatcher.Secret{rotated}, e.Secrets...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		notIn(t, b.Raw(), sk.Secret, []byte(want.Secrets[0].Key), []byte(rotated.Key))

		again := open(t, b, key)
		got, err := again.SigningKey(ctx)
		if err != nil || got.ID != sk.ID || !bytes.Equal(got.Secret, sk.Secret) {
			t.Fatalf("signing key read back %q (%v), stored %q", got.ID, err, sk.ID)
		}
		e, err := again.Endpoint(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Secrets) != 2 || e.Secrets[0] != rotated || e.Secrets[1].Key != want.Secrets[0].Key ||
			e.Secrets[1].ExpiresAt == nil || !e.Secrets[1].ExpiresAt.Equal(until) {
			t.Fatalf("secrets read back %+v", e.Secrets)
		}
		list, err := again.Endpoints(ctx, tenant)
		if err != nil || len(list) != 1 || !sameSecrets(list[0].Secrets, e.Secrets) {
			t.Fatalf("listed %+v, %v", list, err)
		}
	})

	t.Run("another key is refused", func(t *testing.T) {
		b := fresh(t)
		st := open(t, b, key)
		if _, err := st.SigningKey(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateEndpoint(ctx, ep("we_other")); err != nil {
			t.Fatal(err)
		}
		other, _ := sealed.Random()
		_, err := b.Open(other)
		if !errors.Is(err, sealed.ErrWrongKey) {
			t.Fatalf("opened under another key: %v, want sealed.ErrWrongKey", err)
		}
		if _, err := b.Open(key); err != nil {
			t.Fatalf("the right key after a wrong one: %v", err)
		}
	})

	upstreamSecrets(t, fresh, key)

	t.Run("plain text from an earlier version is read and sealed", func(t *testing.T) {
		b := fresh(t)
		plainKey := credential.SigningKey{ID: "generated-20250101", Secret: []byte("a signing key of thirty-two bytes, in plain text")}
		want := ep("we_plain")
		b.WritePlain(plainKey, want)
		st := open(t, b, key)
		notIn(t, b.Raw(), plainKey.Secret, []byte(want.Secrets[0].Key))
		got, err := st.SigningKey(ctx)
		if err != nil || got.ID != plainKey.ID || !bytes.Equal(got.Secret, plainKey.Secret) {
			t.Fatalf("signing key %q %q (%v), stored %q", got.ID, got.Secret, err, plainKey.ID)
		}
		e, err := st.Endpoint(ctx, want.ID)
		if err != nil || !sameSecrets(e.Secrets, want.Secrets) || e.URL != want.URL || e.Firm != want.Firm {
			t.Fatalf("endpoint %+v (%v)", e, err)
		}
	})
}

// upstreamSecrets checks that upstream state (a vendor's rotated refresh
// token, an XPM first-seen stamp) is sealed at rest, bound to the key it
// is kept under, and that plain text from an earlier version is sealed at
// start.
func upstreamSecrets(t *testing.T, fresh func(t *testing.T) SecretsBackend, key *sealed.Key) {
	const (
		tokenKey = "oauth2/xero/client-1/refresh_token"
		stampKey = "xpm/frm_acme/first_seen/inv_1"
	)
	token := []byte("xero-refresh-7f3a9c2e5b1d4e8f")
	stamp := []byte(`"2026-03-02T10:00:00Z"`)
	notIn := func(t *testing.T, raw []byte, values ...[]byte) {
		t.Helper()
		for _, v := range values {
			if bytes.Contains(raw, v) {
				t.Errorf("the backend holds %q in plain text", v)
			}
		}
	}

	t.Run("upstream state is sealed at rest and read back", func(t *testing.T) {
		b := fresh(t)
		st, err := b.Open(key)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string][]byte{tokenKey: token, stampKey: stamp} {
			if err := st.Save(ctx, k, v); err != nil {
				t.Fatal(err)
			}
			if raw := b.UpstreamRaw(k); !sealed.IsSealed(raw) {
				t.Errorf("%s stored as %q, not sealed", k, raw)
			}
		}
		notIn(t, b.Raw(), token, stamp)
		again, err := b.Open(key)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := again.Last(ctx, tokenKey); err != nil || !bytes.Equal(got, token) {
			t.Fatalf("refresh token read back %q, %v", got, err)
		}
	})

	t.Run("an upstream value moved to another key does not open there", func(t *testing.T) {
		b := fresh(t)
		st, err := b.Open(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Save(ctx, tokenKey, token); err != nil {
			t.Fatal(err)
		}
		moved := "oauth2/xero/client-2/refresh_token"
		b.WriteUpstreamRaw(moved, b.UpstreamRaw(tokenKey))
		if got, err := st.Last(ctx, moved); !errors.Is(err, sealed.ErrDamaged) || got != nil {
			t.Fatalf("a value moved to another key read %q, %v; want sealed.ErrDamaged", got, err)
		}
	})

	t.Run("plain upstream state from an earlier version is sealed at start", func(t *testing.T) {
		b := fresh(t)
		b.WriteUpstreamRaw(tokenKey, token)
		b.WriteUpstreamRaw(stampKey, stamp)
		st, err := b.Open(key)
		if err != nil {
			t.Fatal(err)
		}
		notIn(t, b.Raw(), token, stamp)
		for k, v := range map[string][]byte{tokenKey: token, stampKey: stamp} {
			if got, err := st.Last(ctx, k); err != nil || !bytes.Equal(got, v) {
				t.Fatalf("%s read back %q, %v; want %q", k, got, err, v)
			}
		}
	})
}

func sameSecrets(a, b []dispatcher.Secret) bool {
	return slices.EqualFunc(a, b, func(x, y dispatcher.Secret) bool {
		return x.Key == y.Key && (x.ExpiresAt == nil) == (y.ExpiresAt == nil) && (x.ExpiresAt == nil || x.ExpiresAt.Equal(*y.ExpiresAt))
	})
}
