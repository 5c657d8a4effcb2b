package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Scopes every credential may carry.
var Scopes = []string{
	"clients:read", "clients:write",
	"engagements:read", "documents:read", "invoices:read", "people:read",
	"jobs:read", "jobs:write",
	"events:read", "webhooks:read", "webhooks:write",
	"admin",
}

// ErrNotFound is returned for an unknown credential id.
var ErrNotFound = errors.New("credential not found")

// Store keeps credentials. The embedded store and Redis both implement it.
type Store interface {
	SaveCredential(ctx context.Context, c *Credential) error
	Credential(ctx context.Context, id string) (*Credential, error)
	Credentials(ctx context.Context, firm string) ([]*Credential, error)
	// TouchCredentials records last-used times, batched by the registry.
	TouchCredentials(ctx context.Context, lastUsed map[string]time.Time) error
}

// RevocationFeed tells a registry about credentials revoked by another
// gateway instance. Stores shared between instances provide one.
type RevocationFeed interface {
	Revoked(ctx context.Context, since time.Time) ([]string, error)
}

// Registry issues, verifies and revokes credentials. It keeps every
// credential it has seen in memory, so verifying a request costs a
// signature check (cached) and a map lookup.
type Registry struct {
	store  Store
	keys   *Keyring
	now    func() time.Time
	logger *zap.Logger

	mu      sync.RWMutex
	entries map[string]*entry
	// verified caches tokens whose signature has been checked, so the
	// signature is checked once per token rather than once per request.
	verified  sync.Map // token -> *entry
	nVerified atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type entry struct {
	cred     *Credential
	lastUsed atomic.Int64 // unix nanoseconds, 0 = not used since last flush
}

// RegistryConfig tunes a Registry.
type RegistryConfig struct {
	// FlushEvery is how often last-used times are written. Default 5s.
	FlushEvery time.Duration
	// SyncEvery is how often revocations made elsewhere are read, when
	// the store offers a RevocationFeed. Default 250ms.
	SyncEvery time.Duration
	Now       func() time.Time
	Logger    *zap.Logger
}

const maxVerifiedTokens = 100_000

// NewRegistry starts a registry; Close stops its background work.
func NewRegistry(store Store, keys *Keyring, cfg RegistryConfig) *Registry {
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = 5 * time.Second
	}
	if cfg.SyncEvery == 0 {
		cfg.SyncEvery = 250 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Registry{store: store, keys: keys, now: cfg.Now, logger: cfg.Logger,
		entries: map[string]*entry{}, cancel: cancel}
	r.wg.Add(1)
	go r.flushLoop(ctx, cfg.FlushEvery)
	if feed, ok := store.(RevocationFeed); ok {
		r.wg.Add(1)
		go r.syncLoop(ctx, feed, cfg.SyncEvery)
	}
	return r
}

// Close flushes last-used times and stops background work.
func (r *Registry) Close() error {
	r.cancel()
	r.wg.Wait()
	return r.flush(context.Background())
}

// IssueRequest describes a credential to issue.
type IssueRequest struct {
	Firm      string   `json:"firm"`
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	Sandbox   bool     `json:"sandbox"`
	RateLimit string   `json:"rate_limit,omitempty"`
}

// Issue creates a credential and returns it with its token. The token is
// not kept anywhere: this is the only time it exists.
func (r *Registry) Issue(ctx context.Context, req IssueRequest) (*Credential, string, error) {
	if req.Firm == "" || req.Name == "" {
		return nil, "", errors.New("a credential needs a firm and a name")
	}
	if len(req.Scopes) == 0 {
		return nil, "", errors.New("a credential needs at least one scope")
	}
	scopes := slices.Clone(req.Scopes)
	for _, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return nil, "", fmt.Errorf("unknown scope %q (known: %s)", s, strings.Join(Scopes, ", "))
		}
	}
	sort.Strings(scopes)
	scopes = slices.Compact(scopes)
	c := &Credential{
		ID: newID("crd_"), Firm: req.Firm, Name: req.Name, Scopes: scopes,
		Sandbox: req.Sandbox, RateLimit: req.RateLimit, CreatedAt: r.now().UTC().Truncate(time.Second),
	}
	token, err := r.keys.sign(c)
	if err != nil {
		return nil, "", err
	}
	if err := r.store.SaveCredential(ctx, c); err != nil {
		return nil, "", fmt.Errorf("saving credential: %w", err)
	}
	r.remember(c)
	return c, token, nil
}

// Authenticate returns the live credential a bearer token stands for.
func (r *Registry) Authenticate(ctx context.Context, token string) (*Credential, error) {
	if v, ok := r.verified.Load(token); ok {
		return r.use(v.(*entry))
	}
	cl, err := r.keys.verify(token)
	if err != nil {
		return nil, err
	}
	e, err := r.lookup(ctx, cl.Subject)
	if err != nil {
		return nil, err
	}
	if e.cred.Firm != cl.Firm || e.cred.Sandbox != cl.Sandbox {
		return nil, fmt.Errorf("%w: token does not match credential %s", errBadToken, cl.Subject)
	}
	if r.nVerified.Add(1) > maxVerifiedTokens {
		r.verified.Clear()
		r.nVerified.Store(0)
	}
	r.verified.Store(token, e)
	return r.use(e)
}

func (r *Registry) use(e *entry) (*Credential, error) {
	r.mu.RLock()
	c := e.cred
	r.mu.RUnlock()
	if c.RevokedAt != nil {
		return nil, fmt.Errorf("%w: credential %s was revoked", errBadToken, c.ID)
	}
	e.lastUsed.Store(r.now().UnixNano())
	return c, nil
}

func (r *Registry) lookup(ctx context.Context, id string) (*entry, error) {
	r.mu.RLock()
	e, ok := r.entries[id]
	r.mu.RUnlock()
	if ok {
		return e, nil
	}
	c, err := r.store.Credential(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", id, err)
	}
	return r.remember(c), nil
}

func (r *Registry) remember(c *Credential) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[c.ID]; ok {
		e.cred = c
		return e
	}
	e := &entry{cred: c}
	r.entries[c.ID] = e
	return e
}

// List returns the firm's credentials, newest first, with last-used times
// that include uses not yet flushed.
func (r *Registry) List(ctx context.Context, firm string) ([]*Credential, error) {
	creds, err := r.store.Credentials(ctx, firm)
	if err != nil {
		return nil, fmt.Errorf("listing credentials: %w", err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Credential, 0, len(creds))
	for _, c := range creds {
		cp := *c
		if e, ok := r.entries[c.ID]; ok {
			if ns := e.lastUsed.Load(); ns != 0 {
				t := time.Unix(0, ns).UTC()
				cp.LastUsedAt = &t
			}
		}
		out = append(out, &cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out, nil
}

// Get returns one credential.
func (r *Registry) Get(ctx context.Context, id string) (*Credential, error) {
	c, err := r.store.Credential(ctx, id)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Revoke ends a credential. It takes effect on this instance at once and
// on others within their sync interval.
func (r *Registry) Revoke(ctx context.Context, id string) (*Credential, error) {
	c, err := r.store.Credential(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.RevokedAt == nil {
		now := r.now().UTC()
		cp := *c
		cp.RevokedAt = &now
		if err := r.store.SaveCredential(ctx, &cp); err != nil {
			return nil, fmt.Errorf("saving revocation: %w", err)
		}
		c = &cp
	}
	r.remember(c)
	return c, nil
}

func (r *Registry) flushLoop(ctx context.Context, every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.flush(ctx); err != nil {
				r.logger.Warn("recording credential last use", zap.Error(err))
			}
		}
	}
}

// flush writes last-used times gathered since the previous flush.
func (r *Registry) flush(ctx context.Context) error {
	used := map[string]time.Time{}
	r.mu.RLock()
	for id, e := range r.entries {
		if ns := e.lastUsed.Swap(0); ns != 0 {
			used[id] = time.Unix(0, ns).UTC()
		}
	}
	r.mu.RUnlock()
	if len(used) == 0 {
		return nil
	}
	return r.store.TouchCredentials(ctx, used)
}

func (r *Registry) syncLoop(ctx context.Context, feed RevocationFeed, every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	since := r.now().Add(-every)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := r.now()
		ids, err := feed.Revoked(ctx, since.Add(-time.Second))
		if err != nil {
			r.logger.Warn("reading revocations", zap.Error(err))
			continue
		}
		since = now
		for _, id := range ids {
			c, err := r.store.Credential(ctx, id)
			if err == nil {
				r.remember(c)
			}
		}
	}
}

const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// newID returns prefix plus 24 random base32 characters.
func newID(prefix string) string {
	var raw [24]byte
	rand.Read(raw[:])
	b := []byte(prefix)
	for _, v := range raw {
		b = append(b, idAlphabet[v&31])
	}
	return string(b)
}
