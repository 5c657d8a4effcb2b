package auth

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/practicegw/practicegw/store/credential"
)

type memStore struct {
	mu    sync.Mutex
	creds map[string]*credential.Credential
}

func (m *memStore) SaveCredential(_ context.Context, c *credential.Credential) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := *c
	m.creds[c.ID] = &cp
	return nil
}

func (m *memStore) Credential(_ context.Context, id string) (*credential.Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.creds[id]
	if !ok {
		return nil, credential.ErrNotFound
	}
	cp := *c
	return &cp, nil
}

func (m *memStore) Credentials(_ context.Context, firm string) ([]*credential.Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*credential.Credential
	for _, c := range m.creds {
		if firm == "" || c.Firm == firm {
			cp := *c
			out = append(out, &cp)
		}
	}
	return out, nil
}

func (m *memStore) TouchCredentials(_ context.Context, used map[string]time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, at := range used {
		if c, ok := m.creds[id]; ok {
			at := at
			c.LastUsedAt = &at
		}
	}
	return nil
}

func key(id string, b byte) credential.SigningKey {
	return credential.SigningKey{ID: id, Secret: []byte(strings.Repeat(string(b), 32))}
}

func newTestRegistry(t *testing.T, keys ...credential.SigningKey) (*Registry, *memStore) {
	t.Helper()
	ring, err := NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	store := &memStore{creds: map[string]*credential.Credential{}}
	r := NewRegistry(store, ring, RegistryConfig{FlushEvery: time.Hour})
	t.Cleanup(func() { r.Close() })
	return r, store
}

func TestIssueAuthenticateRevoke(t *testing.T) {
	r, store := newTestRegistry(t, key("k1", 'a'))
	ctx := context.Background()
	c, token, err := r.Issue(ctx, IssueRequest{Firm: "frm_acme", Name: "sync", Scopes: []string{"jobs:read", "jobs:read", "clients:write"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, livePrefix) || !strings.HasPrefix(c.ID, "crd_") {
		t.Fatalf("token %q id %q", token[:12], c.ID)
	}
	if got := strings.Join(c.Scopes, ","); got != "clients:write,jobs:read" {
		t.Fatalf("scopes %s", got)
	}
	for _, stored := range store.creds {
		if strings.Contains(stored.Name+stored.ID, token) {
			t.Fatal("token stored")
		}
	}
	got, err := r.Authenticate(ctx, token)
	if err != nil || got.ID != c.ID {
		t.Fatalf("authenticate: %v %v", got, err)
	}
	if _, err := r.Revoke(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Authenticate(ctx, token); err == nil {
		t.Fatal("revoked credential authenticated")
	}
	if _, _, err := r.Issue(ctx, IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:delete"}}); err == nil {
		t.Fatal("unknown scope accepted")
	}
}

func TestSandboxTokens(t *testing.T) {
	r, _ := newTestRegistry(t, key("k1", 'a'))
	_, token, err := r.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "s", Scopes: []string{"jobs:read"}, Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, sandboxPrefix) {
		t.Fatalf("sandbox token %q", token[:12])
	}
	c, err := r.Authenticate(context.Background(), token)
	if err != nil || !c.Sandbox {
		t.Fatalf("sandbox credential: %+v %v", c, err)
	}
	if _, err := r.Authenticate(context.Background(), livePrefix+strings.TrimPrefix(token, sandboxPrefix)); err == nil {
		t.Fatal("sandbox token accepted as live")
	}
}

// TestAlgorithmPinned refuses tokens that are not HS256 with a known key,
// however they are dressed.
func TestAlgorithmPinned(t *testing.T) {
	r, _ := newTestRegistry(t, key("k1", 'a'))
	c, _, err := r.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	cl := claims{Firm: c.Firm, RegisteredClaims: jwt.RegisteredClaims{Issuer: issuer, Subject: c.ID, IssuedAt: jwt.NewNumericDate(time.Now())}}
	sign := func(m jwt.SigningMethod, kid string, k any) string {
		tok := jwt.NewWithClaims(m, cl)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return livePrefix + s
	}
	none := func() string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`))
		p := base64.RawURLEncoding.EncodeToString([]byte(`{"firm":"frm_acme","iss":"practicegw","sub":"` + c.ID + `"}`))
		return livePrefix + h + "." + p + "."
	}
	for name, token := range map[string]string{
		"alg none":     none(),
		"HS384":        sign(jwt.SigningMethodHS384, "k1", key("k1", 'a').Secret),
		"wrong secret": sign(jwt.SigningMethodHS256, "k1", key("k1", 'b').Secret),
		"unknown kid":  sign(jwt.SigningMethodHS256, "k9", key("k1", 'a').Secret),
		"other issuer": func() string {
			cl.Issuer = "someone"
			defer func() { cl.Issuer = issuer }()
			return sign(jwt.SigningMethodHS256, "k1", key("k1", 'a').Secret)
		}(),
	} {
		if _, err := r.Authenticate(context.Background(), token); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := r.Authenticate(context.Background(), sign(jwt.SigningMethodHS256, "k1", key("k1", 'a').Secret)); err != nil {
		t.Errorf("a correctly signed token was refused: %v", err)
	}
}

// TestKeyRotation keeps tokens signed by a retired key valid while the key
// stays on the ring.
func TestKeyRotation(t *testing.T) {
	old, store := newTestRegistry(t, key("2026-01", 'a'))
	_, token, err := old.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := NewKeyring(key("2026-06", 'b'), key("2026-01", 'a'))
	rotated := NewRegistry(store, ring, RegistryConfig{FlushEvery: time.Hour})
	defer rotated.Close()
	if _, err := rotated.Authenticate(context.Background(), token); err != nil {
		t.Fatalf("old token after rotation: %v", err)
	}
	_, fresh, _ := rotated.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "y", Scopes: []string{"jobs:read"}})
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(strings.TrimPrefix(fresh, livePrefix), ".")[0])
	if !strings.Contains(string(header), `"kid":"2026-06"`) {
		t.Fatalf("new tokens should be signed by the first key: %s", header)
	}
	ring2, _ := NewKeyring(key("2026-06", 'b'))
	retired := NewRegistry(store, ring2, RegistryConfig{FlushEvery: time.Hour})
	defer retired.Close()
	if _, err := retired.Authenticate(context.Background(), token); err == nil {
		t.Fatal("token of a removed key accepted")
	}
}

func TestLastUsedAndStale(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ring, _ := NewKeyring(key("k1", 'a'))
	store := &memStore{creds: map[string]*credential.Credential{}}
	r := NewRegistry(store, ring, RegistryConfig{FlushEvery: time.Hour, Clock: func() time.Time { return now }})
	c, token, _ := r.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	if c.Stale(now.Add(89 * 24 * time.Hour)) {
		t.Fatal("stale after 89 days unused")
	}
	if !c.Stale(now.Add(90 * 24 * time.Hour)) {
		t.Fatal("not stale after 90 days unused")
	}
	now = now.Add(24 * time.Hour)
	if _, err := r.Authenticate(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	list, _ := r.List(context.Background(), "frm_acme")
	if list[0].LastUsedAt == nil || !list[0].LastUsedAt.Equal(now) {
		t.Fatalf("last used %v, want %v", list[0].LastUsedAt, now)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	stored, _ := store.Credential(context.Background(), c.ID)
	if stored.LastUsedAt == nil || !stored.LastUsedAt.Equal(now) {
		t.Fatalf("last use not flushed on close: %v", stored.LastUsedAt)
	}
	if stored.Stale(now.Add(89 * 24 * time.Hour)) {
		t.Fatal("a used credential counts from its last use")
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	ring, _ := NewKeyring(key("k1", 'a'))
	r := NewRegistry(&memStore{creds: map[string]*credential.Credential{}}, ring, RegistryConfig{FlushEvery: time.Hour})
	defer r.Close()
	_, token, _ := r.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.Authenticate(context.Background(), token); err != nil {
				b.Fatal(err)
			}
		}
	})
}
