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

	"github.com/practicegw/practicegw/store/credential"
)

// Scopes every credential may carry.
var Scopes = []string{
	"clients:read", "clients:write",
	"engagements:read", "documents:read", "invoices:read", "people:read",
	"jobs:read", "jobs:write",
	"events:read", "webhooks:read", "webhooks:write",
	"admin",
}

// Store keeps credentials. The embedded store and Redis both implement it.
type Store interface {
	SaveCredential(ctx context.Context, c *credential.Credential) error
	Credential(ctx context.Context, id string) (*credential.Credential, error)
	Credentials(ctx context.Context, firm string) ([]*credential.Credential, error)
	// TouchCredentials records last-used times, batched by the registry.
	TouchCredentials(ctx context.Context, lastUsed map[string]time.Time) error
}

// RevocationFeed tells a registry about credentials revoked by any gateway
// instance. Stores shared between instances provide one: a feed whose
// positions are the store's own (never an instance's clock), so that
// following it from the last position applied cannot skip a revocation.
type RevocationFeed interface {
	// Revocations returns every revoked credential id and the feed's
	// position they include.
	Revocations(ctx context.Context) (ids []string, pos string, err error)
	// RevokedAfter returns the ids revoked after pos, in order, and the
	// position after them. credential.ErrFeedGap says the feed no longer holds pos:
	// the registry then reads Revocations again.
	RevokedAfter(ctx context.Context, pos string) (ids []string, next string, err error)
}

// ErrRevoked is Standing's answer for a credential that was revoked.
var ErrRevoked = errors.New("credential revoked")

// ErrNotSynced refuses credentials authorized from their tokens until the
// registry has read which are revoked: it fails closed.
var ErrNotSynced = errors.New("revocations not read yet")

// Registry issues, verifies and revokes credentials. A token carries what
// authorization needs (firm, scopes, sandbox, ceiling), so verifying a
// request costs a signature check (cached) and a look at the set of
// revoked credentials, which the registry keeps whole in memory and
// current from the store's RevocationFeed: no store read on the request's
// path, so an instance authorizes a credential it has never seen while the
// shared store is away. Tokens issued before they carried scopes are
// looked up in the store once.
type Registry struct {
	store  Store
	keys   *Keyring
	now    func() time.Time
	logger *zap.Logger

	mu sync.RWMutex
	// entries are credentials seen, for last-used times and tokens that
	// need the store; at most maxEntries, idle ones dropped past it.
	entries map[string]*entry
	// revoked is every revoked credential, and synced says it was read
	// whole at least once.
	revoked map[string]struct{}
	synced  bool
	// verified caches tokens whose signature has been checked, so the
	// signature is checked once per token rather than once per request.
	verified  sync.Map // token -> *entry
	nVerified atomic.Int64
	// changed is closed, and replaced, whenever the registry learns of a
	// revocation, so that what holds a credential for long (an event
	// stream) can look again at once.
	changed chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type entry struct {
	cred *credential.Credential
	// fromToken says cred was read from a token's claims, not the store.
	fromToken bool
	lastUsed  atomic.Int64 // unix nanoseconds, 0 = not used since last flush
}

// RegistryConfig tunes a Registry.
type RegistryConfig struct {
	// FlushEvery is how often last-used times are written. Default 5s.
	FlushEvery time.Duration
	// SyncEvery is how often the RevocationFeed is followed, when the
	// store offers one. Default 250ms, so that a revocation is seen
	// everywhere within a second.
	SyncEvery time.Duration
	// ResyncEvery is how often the whole set of revocations is read
	// again from the feed, in case anything went amiss. Default 5m.
	ResyncEvery time.Duration
	// Clock stamps issue and last use and schedules the resync, named
	// as the dispatcher's and the limiter's are. Default time.Now.
	Clock  func() time.Time
	Logger *zap.Logger
}

const (
	maxVerifiedTokens = 100_000
	maxEntries        = 100_000
	// firstSyncTimeout bounds the first read of revocations at start;
	// past it the registry keeps trying in the background.
	firstSyncTimeout = 2 * time.Second
)

// NewRegistry starts a registry; Close stops its background work. It reads
// the revoked credentials before it returns, or keeps trying in the
// background if the store does not answer, meanwhile refusing credentials
// that would be authorized from their tokens.
func NewRegistry(store Store, keys *Keyring, cfg RegistryConfig) *Registry {
	if cfg.FlushEvery == 0 {
		cfg.FlushEvery = 5 * time.Second
	}
	if cfg.SyncEvery == 0 {
		cfg.SyncEvery = 250 * time.Millisecond
	}
	if cfg.ResyncEvery == 0 {
		cfg.ResyncEvery = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Registry{store: store, keys: keys, now: cfg.Clock, logger: cfg.Logger,
		entries: map[string]*entry{}, revoked: map[string]struct{}{}, changed: make(chan struct{}), cancel: cancel}
	r.wg.Add(1)
	go r.flushLoop(ctx, cfg.FlushEvery)
	feed, _ := store.(RevocationFeed)
	first, cancelFirst := context.WithTimeout(ctx, firstSyncTimeout)
	pos, err := r.resync(first, feed)
	cancelFirst()
	if err != nil {
		r.logger.Warn("reading revoked credentials", zap.Error(err))
	}
	if feed != nil || err != nil {
		r.wg.Add(1)
		go r.syncLoop(ctx, feed, pos, err == nil, cfg.SyncEvery, cfg.ResyncEvery)
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
func (r *Registry) Issue(ctx context.Context, req IssueRequest) (*credential.Credential, string, error) {
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
	c := &credential.Credential{
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
func (r *Registry) Authenticate(ctx context.Context, token string) (*credential.Credential, error) {
	if v, ok := r.verified.Load(token); ok {
		return r.use(v.(*entry))
	}
	cl, err := r.keys.verify(token)
	if err != nil {
		return nil, err
	}
	var e *entry
	if cl.Scopes != nil {
		e = r.fromToken(cl)
	} else {
		// Issued before tokens carried scopes: the store says.
		if e, err = r.lookup(ctx, cl.Subject); err != nil {
			return nil, err
		}
		if e.cred.Firm != cl.Firm || e.cred.Sandbox != cl.Sandbox {
			return nil, fmt.Errorf("%w: token does not match credential %s", errBadToken, cl.Subject)
		}
	}
	c, err := r.use(e)
	if err != nil {
		return nil, err
	}
	if r.nVerified.Add(1) > maxVerifiedTokens {
		r.verified.Clear()
		r.nVerified.Store(0)
	}
	r.verified.Store(token, e)
	return c, nil
}

// fromToken is the entry for a credential authorized by its token's
// claims: the one already held, or a new one from the claims.
func (r *Registry) fromToken(cl claims) *entry {
	r.mu.RLock()
	e, ok := r.entries[cl.Subject]
	r.mu.RUnlock()
	if ok {
		return e
	}
	c := &credential.Credential{ID: cl.Subject, Firm: cl.Firm, Scopes: cl.Scopes, Sandbox: cl.Sandbox, RateLimit: cl.RateLimit}
	if cl.IssuedAt != nil {
		c.CreatedAt = cl.IssuedAt.UTC()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[c.ID]; ok {
		return e
	}
	e = &entry{cred: c, fromToken: true}
	r.entries[c.ID] = e
	return e
}

func (r *Registry) use(e *entry) (*credential.Credential, error) {
	r.mu.RLock()
	c := e.cred
	_, revoked := r.revoked[c.ID]
	synced := r.synced
	r.mu.RUnlock()
	if revoked || c.RevokedAt != nil {
		return nil, fmt.Errorf("%w: credential %s was revoked", errBadToken, c.ID)
	}
	if !synced && e.fromToken {
		// Authorized from its token alone, before the registry knows
		// what is revoked.
		return nil, ErrNotSynced
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

func (r *Registry) remember(c *credential.Credential) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.RevokedAt != nil {
		r.revoked[c.ID] = struct{}{}
		r.signalLocked()
	}
	if e, ok := r.entries[c.ID]; ok {
		e.cred, e.fromToken = c, false
		return e
	}
	e := &entry{cred: c}
	r.entries[c.ID] = e
	return e
}

// List returns the firm's credentials, newest first, with last-used times
// that include uses not yet flushed.
func (r *Registry) List(ctx context.Context, firm string) ([]*credential.Credential, error) {
	creds, err := r.store.Credentials(ctx, firm)
	if err != nil {
		return nil, fmt.Errorf("listing credentials: %w", err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*credential.Credential, 0, len(creds))
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
func (r *Registry) Get(ctx context.Context, id string) (*credential.Credential, error) {
	c, err := r.store.Credential(ctx, id)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Revoke ends a credential. It takes effect on this instance at once and
// on others within their sync interval.
func (r *Registry) Revoke(ctx context.Context, id string) (*credential.Credential, error) {
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
	r.mu.Lock()
	for id, e := range r.entries {
		if ns := e.lastUsed.Swap(0); ns != 0 {
			used[id] = time.Unix(0, ns).UTC()
		} else if len(r.entries) > maxEntries {
			// Idle since the last flush: read again from its token or
			// the store when it returns.
			delete(r.entries, id)
		}
	}
	r.mu.Unlock()
	if len(used) == 0 {
		return nil
	}
	return r.store.TouchCredentials(ctx, used)
}

// resync reads the whole set of revoked credentials: from the feed, or
// for a store only this instance writes, from its credentials. It returns
// the feed's position the set includes.
func (r *Registry) resync(ctx context.Context, feed RevocationFeed) (string, error) {
	var (
		ids []string
		pos string
	)
	if feed != nil {
		var err error
		if ids, pos, err = feed.Revocations(ctx); err != nil {
			return "", err
		}
	} else {
		creds, err := r.store.Credentials(ctx, "")
		if err != nil {
			return "", err
		}
		for _, c := range creds {
			if c.RevokedAt != nil {
				ids = append(ids, c.ID)
			}
		}
	}
	revoked := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		revoked[id] = struct{}{}
	}
	r.mu.Lock()
	// A revocation this instance made while the read was out stays.
	for id, e := range r.entries {
		if e.cred.RevokedAt != nil {
			revoked[id] = struct{}{}
		}
	}
	r.revoked, r.synced = revoked, true
	r.signalLocked()
	r.mu.Unlock()
	return pos, nil
}

// syncLoop follows the feed from pos every interval, and reads the whole
// set again every resync, after a gap, and until a first read succeeds. A
// failed read is retried from the same position: nothing is skipped.
func (r *Registry) syncLoop(ctx context.Context, feed RevocationFeed, pos string, synced bool, every, resync time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	lastResync := r.now()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error
		switch {
		case !synced || feed != nil && r.now().Sub(lastResync) >= resync:
			var p string
			if p, err = r.resync(ctx, feed); err == nil {
				pos, synced, lastResync = p, true, r.now()
			}
		case feed != nil:
			var ids []string
			ids, pos, err = r.follow(ctx, feed, pos)
			if errors.Is(err, credential.ErrFeedGap) {
				synced = false // read the whole set next
			}
			r.markRevoked(ids)
		}
		if err != nil && !failing {
			r.logger.Warn("reading revoked credentials", zap.Error(err))
		} else if err == nil && failing {
			r.logger.Info("reading revoked credentials again")
		}
		failing = err != nil
		if synced && feed == nil {
			return // a store only this instance writes: nothing to follow
		}
	}
}

// follow reads what the feed holds after pos, keeping pos on failure.
func (r *Registry) follow(ctx context.Context, feed RevocationFeed, pos string) ([]string, string, error) {
	ids, next, err := feed.RevokedAfter(ctx, pos)
	if err != nil {
		return nil, pos, err
	}
	return ids, next, nil
}

func (r *Registry) markRevoked(ids []string) {
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	for _, id := range ids {
		r.revoked[id] = struct{}{}
	}
	r.signalLocked()
	r.mu.Unlock()
}

// Standing returns the credential c as the registry knows it now: its
// current scopes, or ErrRevoked once it was revoked on any instance (as
// soon as the revocation feed says so). It reads no store: what holds a
// credential for long (an event stream) asks it often.
//
// Before the registry has read which credentials are revoked it vouches
// for none (ErrNotSynced), as Authenticate does not.
func (r *Registry) Standing(c *credential.Credential) (*credential.Credential, error) {
	r.mu.RLock()
	_, revoked := r.revoked[c.ID]
	if e, ok := r.entries[c.ID]; ok {
		c = e.cred
	}
	synced := r.synced
	r.mu.RUnlock()
	switch {
	case revoked || c.RevokedAt != nil:
		return nil, fmt.Errorf("%w: %s", ErrRevoked, c.ID)
	case !synced:
		return nil, ErrNotSynced
	}
	return c, nil
}

// Changed returns a channel that is closed when the registry next learns
// of a revocation.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changed
}

// signalLocked wakes every Changed waiter; r.mu is held for writing.
func (r *Registry) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
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
