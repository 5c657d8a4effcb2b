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

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/recordindex"
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
	tenant  practice.Tenant
	store   Store
	updates UpdateFeed
	// other keeps what the upstream state store keeps besides records
	// (vendors' rotated refresh tokens).
	other changes.StateStore
	// fence guards the writes of a connection's model (Config.Fence).
	fence *Fence

	mu    sync.RWMutex
	kinds map[practice.Kind]*kindModel
	// letters are the engagement letters among the documents held, which
	// engagements are linked to as they are read (letters.go).
	letters *practice.Letters

	// applied is the feed position the memory reflects; catching up is
	// one goroutine at a time.
	catchUp sync.Mutex
	applied atomic.Pointer[string]
	// write orders this instance's writes: what is there is compared
	// with an update and the update stored in one turn, so an older
	// observation never lands after a newer one.
	write sync.Mutex

	// behind is set while this instance serves a copy older than the
	// shared feed (trimmed past its position, or a catch-up longer than
	// a read may wait): reads say lagging until the background catch-up
	// reaches the feed's head.
	behind   atomic.Bool
	catching atomic.Bool
	// unloaded is set while this instance does not hold the firm
	// (Unload): memory keeps none of its records, and the next catch-up
	// loads them whole before anything is read or compared.
	unloaded atomic.Bool
	// goBackground runs the catch-up; the model's own goroutine unless a
	// test schedules it.
	goBackground func(func(context.Context))
	// announcing are the records whose change records are being
	// published, which reads wait for (announced.go).
	announcing announcing
	quit       chan struct{}
	closeOnce  sync.Once
	wg         sync.WaitGroup
}

// kindModel is one kind's records and what the sync says of them.
type kindModel struct {
	col *recordindex.Index
	// vendor reads a record the backfill has not reached yet.
	vendor    practice.Reader
	freshness atomic.Pointer[practice.Freshness]
	// gone holds the last state of each record removed, so that an
	// observation read before the removal (a late webhook's re-read)
	// does not bring it back: only a newer state of it does.
	gone map[string]json.RawMessage
	// readAt is when the read of a record's state began, for states
	// that publish no modification time (Karbon's users), when known:
	// what orders two of them.
	readAt map[string]time.Time
	// served is what the sync said of k when this instance last had
	// everything the feed held: what it serves while it is behind.
	served atomic.Pointer[practice.Freshness]
}

// Config builds a Model.
type Config struct {
	Firm  string
	Store Store
	// Updates is set when other processes write the same Store (Redis).
	Updates UpdateFeed
	// Other keeps every state key that is not a record of the model.
	Other changes.StateStore
	// Fence, when set, guards every write of the model and its syncs'
	// checkpoints (a Store that is a Fencer): the connection the model
	// was opened for and its generation.
	Fence *Fence
	// Letters, when set, are the firm's letters and engagements' dates,
	// shared by the copies of its systems, so that an engagement one
	// copy holds links a letter another holds (letters.go); nil keeps
	// them to this model.
	Letters *practice.Letters
	// Background runs the catch-up of an instance behind the feed; nil
	// is a goroutine the model owns (Close waits for it). A simulation
	// sets it to run the catch-up when its scheduler chooses.
	Background func(run func(context.Context))
}

// New makes a firm's model with no kinds. The firm's systems are opened
// on it (it is the state their change records are compared with), then
// Serve names the kinds each owns and Load reads the records.
func New(cfg Config) *Model {
	m := &Model{
		tenant:  practice.Tenant{Firm: cfg.Firm},
		store:   cfg.Store,
		updates: cfg.Updates,
		other:   cfg.Other,
		fence:   cfg.Fence,
		kinds:   map[practice.Kind]*kindModel{},
		letters: cfg.Letters,
		quit:    make(chan struct{}),
	}
	if m.letters == nil {
		m.letters = practice.NewLetters()
	}
	m.goBackground = cfg.Background
	if m.goBackground == nil {
		m.goBackground = m.goOwned
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
	km := &kindModel{vendor: vendor, col: recordindex.NewIndex(nil), gone: map[string]json.RawMessage{},
		readAt: map[string]time.Time{}}
	km.freshness.Store(&practice.Freshness{State: StateBackfilling})
	km.served.Store(km.freshness.Load())
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
	if m.updates != nil {
		var err error
		if head, err = m.updates.Head(ctx, m.tenant.Firm); err != nil {
			return err
		}
	}
	cols := map[practice.Kind][]recordindex.Entry{}
	gone := map[practice.Kind]map[string]json.RawMessage{}
	err := m.store.Load(ctx, m.tenant.Firm, func(u Update) error {
		if _, ok := m.kinds[u.Kind]; !ok || u.Raw == nil {
			return nil
		}
		// A state an earlier version stored with HTML escaping is held,
		// served and compared in the records' one encoding.
		u.Raw = practice.Canonical(u.Raw)
		if isTombstone(u.Raw) {
			if gone[u.Kind] == nil {
				gone[u.Kind] = map[string]json.RawMessage{}
			}
			gone[u.Kind][u.ID] = bytes.Clone(u.Raw)
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
		for id, t := range gone[k] {
			km.gone[id] = t
		}
	}
	m.letters.Reset(m)
	if km, ok := m.kinds[practice.Documents]; ok {
		km.col.Each(func(e *recordindex.Entry) { m.letters.Put(m, e.ID, e.Raw) })
	}
	if km, ok := m.kinds[practice.Engagements]; ok {
		km.col.Each(func(e *recordindex.Entry) { m.letters.PutEngagement(m, e.ID, e.Raw) })
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

// Freshness is what this instance serves of k: what the sync last said
// of k's records, or, while this instance is behind the shared feed,
// lagging and confirmed no later than when it last caught up.
func (m *Model) Freshness(k practice.Kind) (practice.Freshness, bool) {
	km, ok := m.kinds[k]
	if !ok {
		return practice.Freshness{}, false
	}
	if m.behind.Load() {
		f := *km.served.Load()
		f.State, f.Reason = StateLagging, ""
		return f, true
	}
	return *km.freshness.Load(), true
}

// SetFreshness records what the sync says of k's records.
func (m *Model) SetFreshness(k practice.Kind, f practice.Freshness) {
	if km, ok := m.kinds[k]; ok {
		km.freshness.Store(&f)
		if !m.behind.Load() {
			km.served.Store(&f)
		}
	}
}

// Lagging reports whether this instance serves a copy behind the shared
// feed, while it catches up in the background.
func (m *Model) Lagging() bool { return m.behind.Load() }

// Close stops the background catch-up and waits for it.
func (m *Model) Close() {
	m.closeOnce.Do(func() { close(m.quit) })
	m.wg.Wait()
	// What it held is no longer the firm's to link, when its letters are
	// shared with the firm's other copies.
	m.letters.Reset(m)
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
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	m.awaitAnnounced(ctx, t, k, "")
	var page practice.Page
	err = m.whileLoaded(ctx, m.catchUpForRead, func() {
		page = km.col.Page(q, limit)
		for i, raw := range page.Items {
			page.Items[i] = m.linkedLocked(k, raw)
		}
	})
	return page, err
}

// Get serves one record. Until the backfill of k has ended, a record not
// here yet is read from the vendor and kept, rather than answered as
// missing.
func (m *Model) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	km, err := m.kind(t, k)
	if err != nil {
		return nil, err
	}
	m.awaitAnnounced(ctx, t, k, id)
	var raw json.RawMessage
	if err := m.whileLoaded(ctx, m.catchUpForRead, func() { raw = m.linkedLocked(k, m.findLocked(km, id)) }); err != nil {
		return nil, err
	}
	if raw != nil {
		return raw, nil
	}
	if km.freshness.Load().Backfilled || km.vendor == nil {
		return nil, fmt.Errorf("%s %s: %w", k.Singular(), id, practice.ErrNotFound)
	}
	raw, err = km.vendor.Get(ctx, t, k, id)
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
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.linkedLocked(k, raw), nil
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
	return m.findLocked(km, id)
}

// findLocked is find; the caller holds mu.
func (m *Model) findLocked(km *kindModel, id string) json.RawMessage {
	if e := km.col.Find(id); e != nil {
		return e.Raw
	}
	return nil
}

// whileLoaded catches up with catchUp, then runs fn under the read lock
// over memory that holds the firm: an Unload between the two (this
// instance no longer holds the firm) makes it load and catch up again
// rather than answer from an empty copy.
func (m *Model) whileLoaded(ctx context.Context, catchUp func(context.Context) error, fn func()) error {
	for {
		if err := catchUp(ctx); err != nil {
			return err
		}
		m.mu.RLock()
		if !m.unloaded.Load() {
			fn()
			m.mu.RUnlock()
			return nil
		}
		m.mu.RUnlock()
	}
}

// Apply writes updates to the store, then to memory, so that this
// instance reads them at once and others when they next catch up. An
// update older than the record's state here, by the version or
// updated_at the vendor publishes, is left out: whichever order
// observations arrive in, the newest one stays.
func (m *Model) Apply(ctx context.Context, us []Update) error {
	for i, u := range us {
		if _, ok := m.kinds[u.Kind]; !ok {
			return fmt.Errorf("read model of %s has no %s", m.tenant.Firm, u.Kind)
		}
		us[i].Raw = practice.Canonical(u.Raw)
	}
	m.write.Lock()
	defer m.write.Unlock()
	if m.updates != nil && (!m.catching.Load() || m.unloaded.Load()) {
		// Compared with what every instance wrote, as far as the feed
		// can tell in the time the write may take; an unloaded model
		// has nothing to compare with until it has loaded.
		if err := m.followOrCatchUp(ctx); err != nil && m.unloaded.Load() {
			return fmt.Errorf("read model of %s: %w: %w", m.tenant.Firm, practice.ErrUnavailable, err)
		}
	}
	return m.applyHeld(ctx, us)
}

// applyHeld is Apply; the caller holds write and has caught up. On a
// shared store the write is taken only if no other instance wrote since
// this one caught up (headStore), so the comparison newer made still
// holds when the write lands: otherwise an instance could write an older
// state just after another wrote a newer one. A refused write catches up
// and compares again.
func (m *Model) applyHeld(ctx context.Context, us []Update) error {
	for attempt := 1; ; attempt++ {
		kept := m.newer(us)
		entries := make([]*recordindex.Entry, len(kept))
		for i, u := range kept {
			if u.Raw == nil || isTombstone(u.Raw) {
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
		if len(kept) == 0 {
			return nil
		}
		written, err := m.persist(ctx, kept, attempt)
		if err != nil {
			return fmt.Errorf("read model of %s: %w", m.tenant.Firm, err)
		}
		if !written {
			continue
		}
		m.mu.Lock()
		for i, u := range kept {
			m.applyLocked(u, entries[i])
		}
		m.mu.Unlock()
		return nil
	}
}

// headStore is a shared Store that writes only after a given feed head.
type headStore interface {
	// ApplyAfter writes a firm's updates, in order, only if the newest
	// position of its feed is still head ("" for none), and returns the
	// position of the last update written; ok is false, with nothing
	// written, when another writer got there first.
	ApplyAfter(ctx context.Context, firm, head string, us []Update) (next string, ok bool, err error)
}

// maxWriteAttempts bounds how often a write is compared again after
// other instances wrote first; past it (a firm written very busily, or a
// feed this instance cannot follow) the write is taken as it is, as
// before conditional writes: available, ordered as well as the last
// comparison could.
const maxWriteAttempts = 8

// persist writes us durably; written is false when another instance
// wrote first and this one has caught up with it, to compare again.
func (m *Model) persist(ctx context.Context, us []Update, attempt int) (written bool, err error) {
	hs, ok := m.store.(headStore)
	if m.updates == nil || !ok || attempt > maxWriteAttempts {
		_, _, err := m.writeStore(ctx, nil, nil, us)
		return true, err
	}
	head := *m.applied.Load()
	next, ok, err := m.writeStore(ctx, hs, &head, us)
	if err != nil {
		return false, err
	}
	if !ok {
		if err := m.followUpdates(ctx); err != nil {
			// Trimmed past, or the store is slow: the next attempt is
			// unconditional.
			if errors.Is(err, ErrGap) {
				m.catchUpLater()
			}
			return m.persist(ctx, us, maxWriteAttempts+1)
		}
		return false, nil
	}
	// Nothing came between head and these updates, which memory takes
	// next: this instance's position moves past them, so its next write
	// is not refused for its own.
	m.catchUp.Lock()
	if *m.applied.Load() == head {
		m.applied.Store(&next)
	}
	m.catchUp.Unlock()
	return true, nil
}

// writeStore writes us to the store, after head when after is not nil, and
// through the model's fence when it has one.
func (m *Model) writeStore(ctx context.Context, hs headStore, after *string, us []Update) (next string, ok bool, err error) {
	if fs, fenced := m.store.(Fencer); fenced && m.fence != nil {
		return fs.ApplyFenced(ctx, *m.fence, after, us)
	}
	if after == nil {
		return "", true, m.store.Apply(ctx, m.tenant.Firm, us)
	}
	return hs.ApplyAfter(ctx, m.tenant.Firm, *after, us)
}

// newer leaves out the updates older than the state held, and turns a
// removal into the record's tombstone; the caller holds write. Each
// update is compared with the record's state as the updates before it
// in us leave it, else as the model holds it.
func (m *Model) newer(us []Update) []Update {
	m.mu.RLock()
	defer m.mu.RUnlock()
	type key struct {
		k  practice.Kind
		id string
	}
	type state struct {
		raw    json.RawMessage
		readAt time.Time
	}
	batch := map[key]state{}
	held := func(k practice.Kind, id string) (cur state, live bool) {
		if st, ok := batch[key{k, id}]; ok {
			return st, !isTombstone(st.raw)
		}
		km := m.kinds[k]
		if e := km.col.Find(id); e != nil {
			return state{e.Raw, km.readAt[id]}, true
		}
		return state{raw: km.gone[id]}, false
	}
	out := us[:0:0]
	for _, u := range us {
		st, live := held(u.Kind, u.ID)
		cur := st.raw
		switch {
		case u.Raw == nil || isTombstone(u.Raw):
			// A removal leaves the tombstone of the state it removes,
			// even one another instance stored after Remove compared:
			// the vendor said the record is gone after every state read
			// before. A removal of a record not held has nothing to
			// remove, and must not overwrite a tombstone kept.
			if !live {
				continue
			}
			u.Raw = tombstone(u.ID, cur, removedAt(u))
		case live && changes.Older(u.Raw, cur):
			continue
		case live && readBefore(u, st.readAt, cur):
			continue
		case !live && cur != nil && !changes.Older(cur, u.Raw):
			// As old as the record's last state before its removal: a
			// late read, not the record back.
			continue
		}
		batch[key{u.Kind, u.ID}] = state{u.Raw, u.ReadAt}
		out = append(out, u)
	}
	return out
}

// readBefore reports whether u is older than the state held, cur, by
// when their reads began, which is what orders two states the vendor
// tells apart by neither version nor modification time: a read that
// began before the held state's is no newer.
func readBefore(u Update, heldReadAt time.Time, cur json.RawMessage) bool {
	if u.ReadAt.IsZero() || heldReadAt.IsZero() || !u.ReadAt.Before(heldReadAt) {
		return false
	}
	return !changes.Older(cur, u.Raw)
}

// applyLocked puts one update in memory; the caller holds mu. It is the
// one place a removal is applied, whichever way it came (this instance's
// reconciliation or change feed, or another's through the shared feed).
func (m *Model) applyLocked(u Update, e *recordindex.Entry) {
	km, ok := m.kinds[u.Kind]
	if !ok {
		return
	}
	if e == nil {
		switch cur := km.col.Find(u.ID); {
		case u.Raw != nil:
			km.gone[u.ID] = u.Raw
		case cur != nil:
			km.gone[u.ID] = tombstone(u.ID, cur.Raw, time.Time{})
		default:
			// A tombstone swept past its retention.
			delete(km.gone, u.ID)
		}
		km.col.Remove(u.ID)
		delete(km.readAt, u.ID)
		switch u.Kind {
		case practice.Documents:
			m.letters.Drop(u.ID)
		case practice.Engagements:
			m.letters.DropEngagement(u.ID)
		}
		return
	}
	delete(km.gone, u.ID)
	km.col.Upsert(*e)
	switch u.Kind {
	case practice.Documents:
		m.letters.Put(m, u.ID, e.Raw)
	case practice.Engagements:
		m.letters.PutEngagement(m, u.ID, e.Raw)
	}
	if !u.ReadAt.IsZero() && changes.Undated(u.Raw) {
		km.readAt[u.ID] = u.ReadAt
	} else {
		delete(km.readAt, u.ID)
	}
}

// Removed reports whether a record of the model was removed, and when
// its removal was confirmed with the vendor: the Recorder brings back no
// record from a read that began before.
func (m *Model) Removed(ctx context.Context, key string) (time.Time, bool, error) {
	t, k, id, ok := changes.ParseStateKey(key)
	if !ok || t != m.tenant || !m.Owns(k) {
		return time.Time{}, false, nil
	}
	var last json.RawMessage
	err := m.whileLoaded(ctx, m.CatchUp, func() {
		if m.kinds[k].col.Find(id) == nil {
			last = m.kinds[k].gone[id]
		}
	})
	if err != nil || last == nil {
		return time.Time{}, false, err
	}
	var ts tombstoneRecord
	_ = json.Unmarshal(last, &ts)
	return ts.RemovedAt, true, nil
}

// removed reports whether k's record id was removed.
func (m *Model) removed(k practice.Kind, id string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.kinds[k].gone[id]
	return ok
}

// Remove removes a record the vendor confirmed it no longer has, at
// when that was confirmed: its tombstone keeps the time, so that no read
// begun before brings it back. announce is called first with the
// record's last state, once this instance has caught up with the others
// and still holds the record; the removal's change has the same id
// whoever announces it (changes.RemovalChange), so it is one change. The
// announcement is made outside the model's write lock, so that removals
// of a burst publish in the store's shared commits, as states do; the
// tombstone is written after it, over whatever was applied meanwhile (a
// read begun before the removal is older than it; one begun after is
// accepted again by the next read).
func (m *Model) Remove(ctx context.Context, k practice.Kind, id string, at time.Time, announce func(before json.RawMessage) error) error {
	km, ok := m.kinds[k]
	if !ok {
		return fmt.Errorf("read model of %s has no %s", m.tenant.Firm, k)
	}
	catchUp := func() error {
		if m.updates == nil {
			return nil
		}
		if err := m.followOrCatchUp(ctx); err != nil {
			return fmt.Errorf("read model of %s: %w: %w", m.tenant.Firm, practice.ErrUnavailable, err)
		}
		return nil
	}
	m.write.Lock()
	err := catchUp()
	before := m.find(km, id)
	m.write.Unlock()
	if err != nil || before == nil {
		return err
	}
	if err := announce(before); err != nil {
		return err
	}
	m.write.Lock()
	defer m.write.Unlock()
	if err := catchUp(); err != nil {
		return err
	}
	last := m.find(km, id)
	if last == nil {
		return nil // removed meanwhile
	}
	return m.applyHeld(ctx, []Update{{Kind: k, ID: id, Raw: tombstone(id, last, at)}})
}

// RemoveState is Remove by a record's state key, for the firm's adapters
// (changes.Recorder.Remove): a webhook that tells a deletion, or reads a
// record the vendor no longer has, removes it from the copy as the
// reconciliation would. A key that is no record of the model is
// forgotten in the other store.
func (m *Model) RemoveState(ctx context.Context, key string, at time.Time, announce func(before json.RawMessage) error) error {
	t, k, id, ok := changes.ParseStateKey(key)
	if !ok || t != m.tenant || !m.Owns(k) {
		before, err := m.other.Last(ctx, key)
		if err != nil || before == nil {
			return err
		}
		if err := announce(before); err != nil {
			return err
		}
		return m.saveOther(ctx, key, nil)
	}
	return m.Remove(ctx, k, id, at, announce)
}

// catchUpForRead catches up before a read, within readSyncTimeout. A
// catch-up longer than that (a follower trimmed past, a large backfill
// on another instance) goes on in the background, and the read is
// answered from what this instance holds, marked lagging until it is
// done; so is a read while the shared store cannot be reached.
//
// An unloaded model has nothing to answer from: it loads the firm within
// the caller's own deadline, or the read fails as unavailable.
func (m *Model) catchUpForRead(ctx context.Context) error {
	if m.updates == nil {
		return nil
	}
	if m.unloaded.Load() {
		return m.CatchUp(ctx)
	}
	if m.catching.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readSyncTimeout)
	defer cancel()
	if err := m.CatchUp(ctx); err != nil {
		m.catchUpLater()
	}
	return nil
}

// readSyncTimeout bounds the catch-up before a read, so that a shared store
// that stopped answering delays a read by no more than this.
const readSyncTimeout = 500 * time.Millisecond

// errBehind is Sync's answer while the copy is behind the feed and the
// background catch-up has it in hand.
var errBehind = errors.New("behind the shared feed; catching up")

// CatchUp applies what other instances wrote since this one last looked:
// one round trip to the shared store when nothing is new, so that a
// caller reads its own write from any instance. A position the feed no
// longer keeps is not reloaded here, inside a caller's deadline, but in
// the background: CatchUp reports the model unavailable meanwhile. Without
// a feed it does nothing.
func (m *Model) CatchUp(ctx context.Context) error {
	if m.updates == nil {
		return nil
	}
	if m.catching.Load() && !m.unloaded.Load() {
		// An unloaded copy loads here all the same: it has nothing to
		// answer from while the background catch-up goes on.
		return fmt.Errorf("read model of %s: %w: %w", m.tenant.Firm, practice.ErrUnavailable, errBehind)
	}
	err := m.followUpdates(ctx)
	if errors.Is(err, ErrGap) {
		m.catchUpLater()
	}
	if err != nil {
		return fmt.Errorf("read model of %s: %w: %w", m.tenant.Firm, practice.ErrUnavailable, err)
	}
	return nil
}

// followUpdates applies the feed from this instance's position to its head; a
// position the feed no longer keeps is ErrGap. An unloaded model loads
// the firm whole instead.
func (m *Model) followUpdates(ctx context.Context) error {
	if m.unloaded.Load() {
		return m.reload(ctx)
	}
	head, err := m.updates.Head(ctx, m.tenant.Firm)
	if err != nil {
		return err
	}
	if head == *m.applied.Load() {
		return nil
	}
	m.catchUp.Lock()
	defer m.catchUp.Unlock()
	// Another caller may have caught up while this one waited; a batch
	// short of full is the end of the feed as it was.
	for pos := *m.applied.Load(); pos != head; {
		us, next, err := m.updates.Since(ctx, m.tenant.Firm, pos, feedBatch)
		if err != nil {
			return err
		}
		if len(us) == 0 || next == pos {
			break
		}
		m.applyUpdates(us)
		pos = next
		m.applied.Store(&next)
		if len(us) < feedBatch {
			break
		}
	}
	return nil
}

// followOrCatchUp follows the feed; a position it no longer keeps starts
// the background catch-up.
func (m *Model) followOrCatchUp(ctx context.Context) error {
	err := m.followUpdates(ctx)
	if errors.Is(err, ErrGap) {
		m.catchUpLater()
	}
	return err
}

// catchUpLater marks the copy lagging and starts the background
// catch-up, unless it runs already.
func (m *Model) catchUpLater() {
	if !m.catching.CompareAndSwap(false, true) {
		return
	}
	m.behind.Store(true)
	m.goBackground(m.catchUpNow)
}

// catchUpNow follows the feed, loading the whole model again when its
// position was trimmed, until it reaches the head; then reads are live
// again. A failure is retried after a pause until the model closes.
func (m *Model) catchUpNow(ctx context.Context) {
	defer m.catching.Store(false)
	for attempt := 0; ; attempt++ {
		err := m.followUpdates(ctx)
		if errors.Is(err, ErrGap) {
			err = m.load(ctx)
		}
		if err == nil {
			m.caughtUp()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 5*time.Second)):
		}
	}
}

// caughtUp clears lagging: what the sync says is what this instance
// serves again.
func (m *Model) caughtUp() {
	m.behind.Store(false)
	for _, km := range m.kinds {
		km.served.Store(km.freshness.Load())
	}
}

// goOwned runs fn on a goroutine the model owns, until Close.
func (m *Model) goOwned(fn func(context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-m.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		fn(ctx)
	}()
}

func (m *Model) applyUpdates(us []Update) {
	entries := make([]*recordindex.Entry, len(us))
	for i, u := range us {
		// Written by an instance of an earlier version, perhaps.
		u.Raw = practice.Canonical(u.Raw)
		us[i].Raw = u.Raw
		if u.Raw == nil || isTombstone(u.Raw) {
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
	var raw json.RawMessage
	err := m.whileLoaded(ctx, m.CatchUp, func() { raw = m.findLocked(m.kinds[k], id) })
	return raw, err
}

// Save is the state store's write: a record of the model becomes its new
// state here, which every instance then serves.
func (m *Model) Save(ctx context.Context, key string, state []byte) error {
	t, k, id, ok := changes.ParseStateKey(key)
	if !ok || t != m.tenant || !m.Owns(k) {
		return m.saveOther(ctx, key, state)
	}
	return m.Apply(ctx, []Update{{Kind: k, ID: id, Raw: bytes.Clone(state)}})
}

// saveOther saves a state that is no record of the model in the other
// store, through the model's fence when it has one.
func (m *Model) saveOther(ctx context.Context, key string, state []byte) error {
	if fs, ok := m.other.(FencedState); ok && m.fence != nil {
		return fs.SaveFenced(ctx, *m.fence, key, state)
	}
	return m.other.Save(ctx, key, state)
}

// Swap is the state store's compare-and-save (changes.Swapper), for the
// keys that are no record of the model (a record's stamp): through the
// model's fence when it has one, so that an instance left with an older
// generation of a connection stamps nothing of the organisation left.
// A record of the model changes through Save alone.
func (m *Model) Swap(ctx context.Context, key string, old, state []byte) (bool, error) {
	if t, k, _, ok := changes.ParseStateKey(key); ok && t == m.tenant && m.Owns(k) {
		return false, fmt.Errorf("swap of %s: a record of the read model is saved, not swapped", key)
	}
	if fs, ok := m.other.(FencedSwapper); ok && m.fence != nil {
		return fs.SwapFenced(ctx, *m.fence, key, old, state)
	}
	if m.fence != nil {
		if _, fencedSaves := m.other.(FencedState); fencedSaves {
			// Unfenced, the swap would escape the fence every save of
			// this store keeps.
			return false, fmt.Errorf("swap of %s: the upstream state store cannot swap under a fence", key)
		}
	}
	return changes.Swap(ctx, m.other, key, old, state)
}

// LastReadAt is when the read of a record's state held began, for a
// state that publishes no modification time; zero when unknown.
func (m *Model) LastReadAt(ctx context.Context, key string) (time.Time, error) {
	t, k, id, ok := changes.ParseStateKey(key)
	if !ok || t != m.tenant || !m.Owns(k) {
		return time.Time{}, nil
	}
	var at time.Time
	err := m.whileLoaded(ctx, m.CatchUp, func() { at = m.kinds[k].readAt[id] })
	return at, err
}

// SaveRead is Save of a state whose read began at readAt.
func (m *Model) SaveRead(ctx context.Context, key string, state []byte, readAt time.Time) error {
	t, k, id, ok := changes.ParseStateKey(key)
	if !ok || t != m.tenant || !m.Owns(k) {
		return m.saveOther(ctx, key, state)
	}
	return m.Apply(ctx, []Update{{Kind: k, ID: id, Raw: bytes.Clone(state), ReadAt: readAt}})
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

// A removal is kept in the store as the record's tombstone: its id and
// the version and updated time of its last state. Every instance, and
// this one after a restart, then knows that a state read before the
// removal (a late webhook's re-read, a page read during it) is old.
type tombstoneRecord struct {
	ID        string          `json:"id"`
	Deleted   bool            `json:"deleted"`
	Version   json.RawMessage `json:"version,omitempty"`
	UpdatedAt json.RawMessage `json:"updated_at,omitempty"`
	// RemovedAt is when the vendor was asked and said the record is gone.
	RemovedAt time.Time `json:"removed_at,omitzero"`
}

func tombstone(id string, last []byte, at time.Time) json.RawMessage {
	t := tombstoneRecord{ID: id, Deleted: true}
	_ = json.Unmarshal(last, &t)
	t.ID, t.Deleted, t.RemovedAt = id, true, at.UTC()
	b, _ := json.Marshal(t)
	return b
}

func isTombstone(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`"deleted":true`)) {
		return false
	}
	var t tombstoneRecord
	return json.Unmarshal(raw, &t) == nil && t.Deleted
}

var (
	_ practice.Reader    = (*Model)(nil)
	_ changes.StateStore = (*Model)(nil)
	_ changes.Swapper    = (*Model)(nil)
)
