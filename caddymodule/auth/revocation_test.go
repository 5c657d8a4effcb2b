package auth

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/store/credential"
)

// sharedStore is a memStore with a revocation feed, as Redis gives
// instances: positions are a sequence the store assigns. fail makes the
// next reads of the feed fail, and lookups can be refused, to stand for a
// store that is away.
type sharedStore struct {
	*memStore
	mu       sync.Mutex
	feed     []string
	fail     int  // feed reads still to fail
	noLookup bool // Credential and Credentials fail
	reads    int
}

var errAway = errors.New("store unreachable")

func newSharedStore() *sharedStore {
	return &sharedStore{memStore: &memStore{creds: map[string]*credential.Credential{}}}
}

func (s *sharedStore) SaveCredential(ctx context.Context, c *credential.Credential) error {
	if err := s.memStore.SaveCredential(ctx, c); err != nil {
		return err
	}
	if c.RevokedAt != nil {
		s.mu.Lock()
		s.feed = append(s.feed, c.ID)
		s.mu.Unlock()
	}
	return nil
}

func (s *sharedStore) Credential(ctx context.Context, id string) (*credential.Credential, error) {
	s.mu.Lock()
	away := s.noLookup
	s.mu.Unlock()
	if away {
		return nil, errAway
	}
	return s.memStore.Credential(ctx, id)
}

func (s *sharedStore) Revocations(context.Context) ([]string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.fail > 0 {
		s.fail--
		return nil, "", errAway
	}
	return append([]string(nil), s.feed...), strconv.Itoa(len(s.feed)), nil
}

func (s *sharedStore) RevokedAfter(_ context.Context, pos string) ([]string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.fail > 0 {
		s.fail--
		return nil, pos, errAway
	}
	n, _ := strconv.Atoi(pos)
	return append([]string(nil), s.feed[n:]...), strconv.Itoa(len(s.feed)), nil
}

func (s *sharedStore) set(f func(s *sharedStore)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

func instance(t *testing.T, store Store, now func() time.Time) *Registry {
	t.Helper()
	ring, err := NewKeyring(key("k1", 'a'))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(store, ring, RegistryConfig{FlushEvery: time.Hour, SyncEvery: 10 * time.Millisecond, Clock: now})
	t.Cleanup(func() { r.Close() })
	return r
}

// poll is how often a test looks again for a revocation to be seen.
const poll = 5 * time.Millisecond

// An instance that has never seen a credential authorizes it from its
// token alone, with its scopes and ceiling, while the store cannot be
// asked for it.
func TestTokenAloneAuthorizes(t *testing.T) {
	store := newSharedStore()
	issuer := instance(t, store, nil)
	c, token, err := issuer.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "sync",
		Scopes: []string{"jobs:read", "clients:write"}, Sandbox: true, RateLimit: "60/m"})
	if err != nil {
		t.Fatal(err)
	}
	other := instance(t, store, nil)
	store.set(func(s *sharedStore) { s.noLookup = true })
	got, err := other.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatalf("a never-seen credential with the store away: %v", err)
	}
	if got.ID != c.ID || got.Firm != "frm_acme" || !got.Sandbox || got.RateLimit != "60/m" ||
		!got.Allows("jobs:read") || !got.Allows("clients:write") || got.Allows("jobs:write") {
		t.Fatalf("authorized as %+v, want %+v", got, c)
	}
}

// A revocation made on one instance is refused on another within a
// second, though the other's clock is far behind and a read of the feed
// fails just after the revocation.
func TestRevocationReachesEveryInstance(t *testing.T) {
	store := newSharedStore()
	a := instance(t, store, nil)
	skewed := func() time.Time { return time.Now().Add(-10 * time.Minute) }
	b := instance(t, store, skewed)
	c, token, err := a.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	store.set(func(s *sharedStore) { s.fail = 3 })
	if _, err := a.Revoke(context.Background(), c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(context.Background(), token); !errors.Is(err, errBadToken) {
		t.Fatalf("the revoking instance: %v, want refused at once", err)
	}
	eventually.True(t, time.Second, poll, "revocation seen by the other instance", func() bool {
		_, err := b.Authenticate(context.Background(), token)
		return errors.Is(err, errBadToken)
	})
	store.set(func(s *sharedStore) {
		if s.fail != 0 {
			t.Errorf("%d injected failures left unread", s.fail)
		}
	})
}

// Until an instance has read which credentials are revoked, it refuses
// credentials it would authorize from their tokens (the handler answers
// 503), then serves them once the store answers.
func TestRefusedUntilRevocationsRead(t *testing.T) {
	store := newSharedStore()
	a := instance(t, store, nil)
	_, token, err := a.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	store.set(func(s *sharedStore) { s.fail = 1 << 30 })
	b := instance(t, store, nil)
	if _, err := b.Authenticate(context.Background(), token); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("before revocations were read: %v, want ErrNotSynced", err)
	}
	// Nor does it vouch for one another instance authenticated (a
	// forwarded request's).
	cred, err := a.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Standing(cred); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("standing before revocations were read: %v, want ErrNotSynced", err)
	}
	store.set(func(s *sharedStore) { s.fail = 0 })
	eventually.True(t, time.Second, poll, "served once revocations are read", func() bool {
		_, err := b.Authenticate(context.Background(), token)
		return err == nil
	})
	if _, err := b.Standing(cred); err != nil {
		t.Fatalf("standing once revocations are read: %v", err)
	}
}

// A feed that reports a gap is read whole again: a revocation that fell in
// the gap is seen.
type gappyStore struct {
	*sharedStore
	gap bool
}

func (g *gappyStore) RevokedAfter(ctx context.Context, pos string) ([]string, string, error) {
	g.mu.Lock()
	gap := g.gap
	g.gap = false
	g.mu.Unlock()
	if gap {
		return nil, pos, credential.ErrFeedGap
	}
	// Past the gap the feed holds nothing of what was trimmed.
	_, next, err := g.sharedStore.RevokedAfter(ctx, pos)
	return nil, next, err
}

func TestFeedGapReadsTheWholeSet(t *testing.T) {
	store := &gappyStore{sharedStore: newSharedStore()}
	a := instance(t, store.sharedStore, nil)
	b := instance(t, store, nil)
	c, token, err := a.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	// The feed never returns the revocation (trimmed), and says so once.
	if _, err := a.Revoke(context.Background(), c.ID); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.gap = true
	store.mu.Unlock()
	eventually.True(t, time.Second, poll, "revocation behind a gap seen", func() bool {
		_, err := b.Authenticate(context.Background(), token)
		return errors.Is(err, errBadToken)
	})
}

// What holds a credential for long (an event stream) learns of a
// revocation made on another instance: Changed wakes it within a second
// and Standing then refuses the credential.
func TestStandingFollowsARevocationOnAnotherInstance(t *testing.T) {
	store := newSharedStore()
	a := instance(t, store, nil)
	b := instance(t, store, nil)
	c, token, err := a.Issue(context.Background(), IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"events:read", "webhooks:read"}})
	if err != nil {
		t.Fatal(err)
	}
	held, err := b.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Standing(held); err != nil || !got.Allows("webhooks:read") {
		t.Fatalf("a standing credential: %+v, %v", got, err)
	}
	changed := b.Changed()
	if _, err := a.Revoke(context.Background(), c.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("the other instance did not signal a change within a second of the revocation")
	}
	if _, err := b.Standing(held); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Standing after the revocation: %v, want ErrRevoked", err)
	}
	if _, err := a.Standing(held); !errors.Is(err, ErrRevoked) {
		t.Fatalf("Standing on the revoking instance: %v, want ErrRevoked", err)
	}
}
