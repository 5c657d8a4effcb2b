package readmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/practicegw/practicegw/adapters/changes"
	"github.com/practicegw/practicegw/internal/practice"
	"github.com/practicegw/practicegw/internal/recordindex"
)

// defaultLimit applies when a query sets no limit; the API always sets one.
const defaultLimit = 50

// feedBatch is how many updates one Since call applies.
const feedBatch = 512

// Model is one firm's read model: the live records of the kinds its real
// systems own. It serves them as a practice.Reader and is the
// changes.StateStore those systems' change records are diffed against. It
// is safe for concurrent use.
type Model struct {
	tenant practice.Tenant
	store  Store
	feed   Feed
	// other keeps what the upstream state store keeps besides records
	// (vendors' rotated refresh tokens).
	other changes.StateStore
	// tombstones keeps what removals leave, when set.
	tombstones TombstoneStore

	mu    sync.RWMutex
	kinds map[practice.Kind]*kindModel

	// applied is the feed position the memory reflects; catching up is
	// one goroutine at a time.
	catchUp sync.Mutex
	applied atomic.Pointer[string]
}

// kindModel is one kind's records and what the sync says of them.
type kindModel struct {
	col *recordindex.Index
	// vendor reads a record the backfill has not reached yet.
	vendor    practice.Reader
	freshness atomic.Pointer[practice.Freshness]
}

// Config builds a Model.
type Config struct {
	Firm  string
	Store Store
	// Feed is set when other processes write the same Store (Redis).
	Feed Feed
	// Other keeps every state key that is not a record of the model.
	Other changes.StateStore
	// Tombstones keeps a tombstone of each record removed; nil keeps none.
	Tombstones TombstoneStore
}

// New makes a firm's model with no kinds. The firm's systems are opened
// on it (it is the state their change records are compared with), then
// Serve names the kinds each owns and Load reads the records.
func New(cfg Config) *Model {
	m := &Model{
		tenant: practice.Tenant{Firm: cfg.Firm},
		store:  cfg.Store,
		feed:   cfg.Feed,
		other:  cfg.Other,
		kinds:  map[practice.Kind]*kindModel{},

		tombstones: cfg.Tombstones,
	}
	if m.other == nil {
		m.other = changes.NewMemoryState()
	}
	empty := ""
	m.applied.Store(&empty)
	return m
}

// Serve makes the model keep kind k, whose records vendor serves until
// the backfill has read them. It is called before Load and before the
// model serves anything.
func (m *Model) Serve(k practice.Kind, vendor practice.Reader) {
	km := &kindModel{vendor: vendor, col: recordindex.NewIndex(nil)}
	km.freshness.Store(&practice.Freshness{State: StateBackfilling})
	m.kinds[k] = km
}

// Load reads the firm's model from its store.
func (m *Model) Load(ctx context.Context) error {
	if err := m.load(ctx); err != nil {
		return fmt.Errorf("read model of %s: %w", m.tenant.Firm, err)
	}
	return nil
}

// load reads the whole model. With a feed, the head is taken first: what
// is written while loading is applied again from the feed, in order.
func (m *Model) load(ctx context.Context) error {
	head := ""
	if m.feed != nil {
		var err error
		if head, err = m.feed.Head(ctx, m.tenant.Firm); err != nil {
			return err
		}
	}
	cols := map[practice.Kind][]recordindex.Entry{}
	err := m.store.Load(ctx, m.tenant.Firm, func(u Update) error {
		if _, ok := m.kinds[u.Kind]; !ok || u.Raw == nil {
			return nil
		}
		e, err := recordindex.NewEntry(bytes.Clone(u.Raw))
		if err != nil {
			return fmt.Errorf("%s %s: %w", u.Kind, u.ID, err)
		}
		cols[u.Kind] = append(cols[u.Kind], e)
		return nil
	})
	if err != nil {
		return err
	}
	m.mu.Lock()
	for k, km := range m.kinds {
		km.col = recordindex.NewIndex(recordindex.Sorted(cols[k]))
	}
	m.mu.Unlock()
	m.applied.Store(&head)
	return nil
}

// Firm is the firm the model serves.
func (m *Model) Firm() string { return m.tenant.Firm }

// Owns reports whether the model keeps records of kind k.
func (m *Model) Owns(k practice.Kind) bool {
	_, ok := m.kinds[k]
	return ok
}

// Count is how many records of k the model has.
func (m *Model) Count(k practice.Kind) int {
	km, ok := m.kinds[k]
	if !ok {
		return 0
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return km.col.Len()
}

// Freshness is what the sync last said of k's records.
func (m *Model) Freshness(k practice.Kind) (practice.Freshness, bool) {
	km, ok := m.kinds[k]
	if !ok {
		return practice.Freshness{}, false
	}
	return *km.freshness.Load(), true
}

// SetFreshness records what the sync says of k's records.
func (m *Model) SetFreshness(k practice.Kind, f practice.Freshness) {
	if km, ok := m.kinds[k]; ok {
		km.freshness.Store(&f)
	}
}

// List serves a page of k from memory, after applying what other
// instances wrote, with the same paging and filters as the demo records.
func (m *Model) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	km, err := m.kind(t, k)
	if err != nil {
		return practice.Page{}, err
	}
	if q.Cursor != "" && !recordindex.ValidCursor(k, q.Cursor) {
		return practice.Page{}, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
			Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
	}
	m.syncForRead(ctx)
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return km.col.Page(q, limit), nil
}

// Get serves one record. Until the backfill of k has ended, a record not
// here yet is read from the vendor and kept, rather than answered as
// missing.
func (m *Model) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	km, err := m.kind(t, k)
	if err != nil {
		return nil, err
	}
	m.syncForRead(ctx)
	if raw := m.find(km, id); raw != nil {
		return raw, nil
	}
	if km.freshness.Load().Backfilled || km.vendor == nil {
		return nil, fmt.Errorf("%s %s: %w", k.Singular(), id, practice.ErrNotFound)
	}
	raw, err := km.vendor.Get(ctx, t, k, id)
	if err != nil {
		return nil, err
	}
	// Kept as the backfill would keep it: the first state seen, with no
	// change record. A state saved meanwhile (a webhook) is newer.
	if m.find(km, id) == nil {
		if err := m.Apply(ctx, []Update{{Kind: k, ID: id, Raw: raw}}); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

func (m *Model) kind(t practice.Tenant, k practice.Kind) (*kindModel, error) {
	km, ok := m.kinds[k]
	if !ok || t != m.tenant {
		return nil, fmt.Errorf("read model of %s has no %s for %s: %w", m.tenant.Firm, k, t, practice.ErrNotFound)
	}
	return km, nil
}

func (m *Model) find(km *kindModel, id string) json.RawMessage {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e := km.col.Find(id); e != nil {
		return e.Raw
	}
	return nil
}

// Apply writes updates to the store, then to memory, so that this
// instance reads them at once and others when they next catch up.
func (m *Model) Apply(ctx context.Context, us []Update) error {
	entries := make([]*recordindex.Entry, len(us))
	for i, u := range us {
		if _, ok := m.kinds[u.Kind]; !ok {
			return fmt.Errorf("read model of %s has no %s", m.tenant.Firm, u.Kind)
		}
		if u.Raw == nil {
			continue
		}
		e, err := recordindex.NewEntry(u.Raw)
		if err != nil {
			return fmt.Errorf("%s %s: %w", u.Kind, u.ID, err)
		}
		if e.ID != u.ID {
			return fmt.Errorf("%s %s: the record's id is %q", u.Kind, u.ID, e.ID)
		}
		entries[i] = &e
	}
	if err := m.noteRemovals(ctx, us); err != nil {
		return err
	}
	if err := m.store.Apply(ctx, m.tenant.Firm, us); err != nil {
		return fmt.Errorf("read model of %s: %w", m.tenant.Firm, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, u := range us {
		m.applyLocked(u, entries[i])
	}
	return nil
}

// applyLocked puts one update in memory; the caller holds mu.
func (m *Model) applyLocked(u Update, e *recordindex.Entry) {
	km, ok := m.kinds[u.Kind]
	if !ok {
		return
	}
	if e == nil {
		km.col.Remove(u.ID)
		return
	}
	km.col.Upsert(*e)
}

// syncForRead catches up before a read. When the shared store cannot be
// reached the read is answered from what this instance holds: a copy a
// little behind beats no answer, and the sync's state says how fresh it
// is.
func (m *Model) syncForRead(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, readSyncTimeout)
	defer cancel()
	_ = m.Sync(ctx)
}

// readSyncTimeout bounds the catch-up before a read, so that a shared store
// that stopped answering delays a read by no more than this.
const readSyncTimeout = 500 * time.Millisecond

// Sync applies what other instances wrote since this one last looked:
// one round trip to the shared store when nothing is new, so that a
// caller reads its own write from any instance. Without a feed it does
// nothing.
func (m *Model) Sync(ctx context.Context) error {
	if m.feed == nil {
		return nil
	}
	head, err := m.feed.Head(ctx, m.tenant.Firm)
	if err != nil {
		return fmt.Errorf("read model of %s: %w: %w", m.tenant.Firm, practice.ErrUnavailable, err)
	}
	if head == *m.applied.Load() {
		return nil
	}
	m.catchUp.Lock()
	defer m.catchUp.Unlock()
	// Another caller may have caught up while this one waited; a batch
	// short of full is the end of the feed as it was.
	for pos := *m.applied.Load(); pos != head; {
		us, next, err := m.feed.Since(ctx, m.tenant.Firm, pos, feedBatch)
		if errors.Is(err, ErrGap) {
			return m.load(ctx)
		}
		if err != nil {
			return fmt.Errorf("read model of %s: %w: %w", m.tenant.Firm, practice.ErrUnavailable, err)
		}
		if len(us) == 0 || next == pos {
			break
		}
		m.applyFeed(us)
		pos = next
		m.applied.Store(&next)
		if len(us) < feedBatch {
			break
		}
	}
	return nil
}

func (m *Model) applyFeed(us []Update) {
	entries := make([]*recordindex.Entry, len(us))
	for i, u := range us {
		if u.Raw == nil {
			continue
		}
		// An update this version cannot index is left out rather than
		// stopping every later one.
		if e, err := recordindex.NewEntry(bytes.Clone(u.Raw)); err == nil {
			entries[i] = &e
		} else {
			us[i].Kind = ""
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, u := range us {
		if u.Kind != "" {
			m.applyLocked(u, entries[i])
		}
	}
}

// Last is the state store's read: a record of the model from memory,
// anything else from the other store.
func (m *Model) Last(ctx context.Context, key string) ([]byte, error) {
	t, k, id, ok := changes.ParseStateKey(key)
	if !ok || t != m.tenant || !m.Owns(k) {
		return m.other.Last(ctx, key)
	}
	if err := m.Sync(ctx); err != nil {
		return nil, err
	}
	return m.find(m.kinds[k], id), nil
}

// Save is the state store's write: a record of the model becomes its new
// state here, which every instance then serves.
func (m *Model) Save(ctx context.Context, key string, state []byte) error {
	t, k, id, ok := changes.ParseStateKey(key)
	if !ok || t != m.tenant || !m.Owns(k) {
		return m.other.Save(ctx, key, state)
	}
	return m.Apply(ctx, []Update{{Kind: k, ID: id, Raw: bytes.Clone(state)}})
}

// ids returns the ids of k's records updated before t, for a
// reconciliation to compare with what the vendor listed.
func (m *Model) idsBefore(k practice.Kind, t time.Time) []string {
	km, ok := m.kinds[k]
	if !ok {
		return nil
	}
	limit := recordindex.Nanos(t)
	m.mu.RLock()
	defer m.mu.RUnlock()
	var ids []string
	km.col.Each(func(e *recordindex.Entry) {
		if e.Updated < limit {
			ids = append(ids, e.ID)
		}
	})
	return ids
}

var (
	_ practice.Reader    = (*Model)(nil)
	_ changes.StateStore = (*Model)(nil)
)
