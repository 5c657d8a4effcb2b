// Package changes turns what adapters read of a vendor's records into
// change records: it keeps the last state seen of each record and
// publishes the difference to a ChangeSink.
package changes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// ChangeSink takes change records to the event pipeline: the gateway's
// outbox or the Kafka changes topic. Publish returns once the change is
// durable; an error makes the webhook answer 5xx so the vendor sends it
// again.
type ChangeSink interface {
	Publish(ctx context.Context, c practice.Change) error
}

// StateStore remembers the last /v1 JSON seen of each upstream record, to
// tell what a vendor's "something changed" notification changed. Last
// returns nil and no error for a record never seen.
type StateStore interface {
	Last(ctx context.Context, key string) ([]byte, error)
	Save(ctx context.Context, key string, state []byte) error
}

// Swapper is a StateStore that saves a state only while its key holds
// what the caller read: what lets the instances sharing the store agree
// on a value each works out from the last one (a record's stamp).
type Swapper interface {
	// Swap saves state under key if the key holds old (nil: nothing
	// kept), and reports whether it did.
	Swap(ctx context.Context, key string, old, state []byte) (bool, error)
}

// Swap is st's Swap when it has one. A store without one is compared and
// written in two steps, which only writers in this process, taking turns,
// may rely on.
func Swap(ctx context.Context, st StateStore, key string, old, state []byte) (bool, error) {
	if sw, ok := st.(Swapper); ok {
		return sw.Swap(ctx, key, old, state)
	}
	cur, err := st.Last(ctx, key)
	if err != nil {
		return false, err
	}
	if !bytes.Equal(cur, old) || (cur == nil) != (old == nil) {
		return false, nil
	}
	return true, st.Save(ctx, key, state)
}

// MemoryState is a StateStore in this process, for tests and single
// instances that accept a first change after a restart having no "before".
type MemoryState struct {
	mu sync.Mutex
	m  map[string][]byte
}

// NewMemoryState makes an empty MemoryState.
func NewMemoryState() *MemoryState { return &MemoryState{m: map[string][]byte{}} }

func (s *MemoryState) Last(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], nil
}

func (s *MemoryState) Save(_ context.Context, key string, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = bytes.Clone(state)
	return nil
}

// Swap implements Swapper.
func (s *MemoryState) Swap(_ context.Context, key string, old, state []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.m[key]
	if (cur == nil) != (old == nil) || !bytes.Equal(cur, old) {
		return false, nil
	}
	s.m[key] = bytes.Clone(state)
	return true, nil
}

// Forget removes every state whose key starts with prefix.
func (s *MemoryState) Forget(_ context.Context, prefix string) error {
	if prefix == "" {
		return ErrForgetAll
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			delete(s.m, k)
		}
	}
	return nil
}

// ErrForgetAll refuses to forget with an empty prefix: every state of
// every firm, which no purge means.
var ErrForgetAll = errors.New("forgetting upstream state needs a prefix")

// Recorder turns fresh upstream reads into change records: it compares a
// record with the last state seen, publishes a Change when they differ and
// then remembers the new state. Saving after publishing means a crash in
// between publishes again rather than never; the change id is derived
// from the record's own version, so the pipeline drops the repeat. An
// adapter keeps one Recorder for its webhooks and its own writes, so both
// take turns on the same record.
type Recorder struct {
	State StateStore
	// Clock stamps OccurredAt when the vendor gives no time; nil is the
	// system clock.
	Clock interface{ Now() time.Time }

	locks [64]sync.Mutex
	seed  maphash.Seed
	once  sync.Once
}

// Observation is one record as just read from upstream.
type Observation struct {
	Tenant     practice.Tenant
	Kind       practice.Kind
	ResourceID string
	After      json.RawMessage
	// Before is what the caller knows the record was (a write read it
	// first); it stands in when no state was saved.
	Before json.RawMessage
	// Created says the vendor reports the record as new (Karbon's
	// Inserted, Xero's CREATE). A record that is not new and has no
	// known before is only remembered: publishing it with no before would
	// announce a long-existing job as opened or an invoice as raised.
	Created bool
	// Version is what the vendor's notification says of this state (its
	// timestamp). It does not make the change id, which comes from the
	// state alone: a webhook and a poll noticing the same state, on any
	// instance, raise one change.
	Version string
	// OccurredAt is when the vendor says the change happened.
	OccurredAt time.Time
	// ReadAt is when the read of After began, when the caller knows it:
	// a record removed since (its removal confirmed with the vendor after
	// the read began) is not brought back by it. Zero is "unknown", and
	// brings back no removed record.
	ReadAt time.Time
	Note   string
}

// Observe records o and reports whether it published a change. The same
// record is observed by one goroutine at a time in this process, so two
// notifications for it cannot both see the same "before".
func (r *Recorder) Observe(ctx context.Context, sink ChangeSink, o Observation) (bool, error) {
	key := StateKey(o.Tenant, o.Kind, o.ResourceID)
	mu := r.lock(key)
	mu.Lock()
	defer mu.Unlock()

	// Compared, published and kept in the records' one encoding.
	o.After, o.Before = practice.Canonical(o.After), practice.Canonical(o.Before)
	before, err := r.State.Last(ctx, key)
	if err != nil {
		return false, fmt.Errorf("last state of %s: %w", key, err)
	}
	before = practice.Canonical(before)
	if before == nil {
		if removedAt, gone, err := r.removed(ctx, key); err != nil {
			return false, err
		} else if gone && !o.ReadAt.After(removedAt) {
			// Read before the record's removal was confirmed: the
			// vendor has deleted it since.
			return false, nil
		}
		before = o.Before
	}
	if before != nil && Older(o.After, before) {
		// A read that began before the state saved (a poll page read
		// before a webhook's re-read) would roll the record back.
		return false, nil
	}
	if before != nil {
		if older, err := r.readBefore(ctx, key, o, before); err != nil || older {
			return false, err
		}
	}
	if before == nil && !o.Created || before != nil && bytes.Equal(before, o.After) {
		if err := r.save(ctx, key, o); err != nil {
			return false, fmt.Errorf("save state of %s: %w", key, err)
		}
		return false, nil
	}
	at := o.OccurredAt
	if at.IsZero() {
		at = r.now()
	}
	c := practice.Change{
		ID:         StateChangeID(o.Tenant, o.Kind, o.ResourceID, o.After),
		Firm:       o.Tenant.Firm,
		Sandbox:    o.Tenant.Sandbox,
		Kind:       o.Kind,
		ResourceID: o.ResourceID,
		After:      o.After,
		Note:       o.Note,
		OccurredAt: at.UTC(),
	}
	if before != nil {
		c.Before = json.RawMessage(before)
	}
	if an, ok := r.State.(Announcer); ok {
		// Published first, kept after: reads wait for the state the
		// change record announces, which a receiver may read at once.
		defer an.Announcing(key)()
	}
	if err := sink.Publish(ctx, c); err != nil {
		return false, fmt.Errorf("publish change %s: %w", c.ID, err)
	}
	if err := r.save(ctx, key, o); err != nil {
		return true, fmt.Errorf("save state of %s: %w", key, err)
	}
	return true, nil
}

// Announcer is a StateStore that serves the states it keeps (the read
// model). A change record is published before its state is kept, so
// that a crash between the two loses no change; an Announcer is told
// first, and holds reads of the record until done, so that a receiver
// reading the record as it hears of the change reads that state or a
// later one.
type Announcer interface {
	Announcing(key string) (done func())
}

// Removal is a record its vendor confirmed it no longer has: a
// notification of its deletion, or a read of it answered not found.
type Removal struct {
	Tenant     practice.Tenant
	Kind       practice.Kind
	ResourceID string
	// At is when the vendor confirmed the removal (after every read begun
	// before it): a state read before At does not bring the record back.
	// Zero is now.
	At time.Time
}

// remover is a StateStore that removes records itself (the read model),
// leaving a tombstone that orders later reads after the removal.
type remover interface {
	// RemoveState removes the record kept under key, as confirmed at
	// at, calling announce with its last state first; nothing when it
	// keeps none.
	RemoveState(ctx context.Context, key string, at time.Time, announce func(before json.RawMessage) error) error
}

// Remove records rm, publishing the record's removal (RemovalChange)
// when a state of it was kept, and reports whether it did. A webhook
// telling the deletion, a poll's change feed and a reconciliation all
// remove through it, so a removal noticed twice, on any instance, is one
// change record.
func (r *Recorder) Remove(ctx context.Context, sink ChangeSink, rm Removal) (bool, error) {
	key := StateKey(rm.Tenant, rm.Kind, rm.ResourceID)
	mu := r.lock(key)
	mu.Lock()
	defer mu.Unlock()
	at := rm.At
	if at.IsZero() {
		at = r.now()
	}
	published := false
	announce := func(before json.RawMessage) error {
		c := RemovalChange(rm.Tenant, rm.Kind, rm.ResourceID, before, at)
		if err := sink.Publish(ctx, c); err != nil {
			return fmt.Errorf("publish removal of %s: %w", rm.ResourceID, err)
		}
		published = true
		return nil
	}
	if rs, ok := r.State.(remover); ok {
		err := rs.RemoveState(ctx, key, at, announce)
		return published, err
	}
	before, err := r.State.Last(ctx, key)
	if err != nil || before == nil {
		return false, err
	}
	if err := announce(before); err != nil {
		return false, err
	}
	return true, r.State.Save(ctx, key, nil)
}

// RemovalChange is the change record of a record's removal: its after is
// null and its id is the removal's, whatever state was removed, so that
// two instances removing it raise one change.
func RemovalChange(t practice.Tenant, k practice.Kind, id string, before json.RawMessage, at time.Time) practice.Change {
	return practice.Change{
		ID:   ChangeID(t, k, id, "removed", nil),
		Firm: t.Firm, Sandbox: t.Sandbox, Kind: k, ResourceID: id,
		Before: bytes.Clone(before), After: json.RawMessage("null"), OccurredAt: at.UTC(),
	}
}

func (r *Recorder) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}

// readOrdered is a StateStore that keeps when the read of a state began,
// for states that publish no modification time (the read model).
type readOrdered interface {
	// LastReadAt is when the read of the state saved under key began;
	// zero when unknown.
	LastReadAt(ctx context.Context, key string) (time.Time, error)
	// SaveRead is Save of a state whose read began at readAt.
	SaveRead(ctx context.Context, key string, state []byte, readAt time.Time) error
}

// readBefore reports whether o's read began before that of the state
// saved, before, which o's own stamps do not order after it: what orders
// two states of a record that publishes no modification time (Karbon's
// users) when a poll page read before a webhook's re-read arrives after.
func (r *Recorder) readBefore(ctx context.Context, key string, o Observation, before []byte) (bool, error) {
	ro, ok := r.State.(readOrdered)
	if !ok || o.ReadAt.IsZero() || !Undated(o.After) || Older(before, o.After) {
		return false, nil
	}
	held, err := ro.LastReadAt(ctx, key)
	if err != nil {
		return false, fmt.Errorf("last read of %s: %w", key, err)
	}
	return !held.IsZero() && o.ReadAt.Before(held), nil
}

// save keeps o's state, with when its read began where the store keeps it.
func (r *Recorder) save(ctx context.Context, key string, o Observation) error {
	if ro, ok := r.State.(readOrdered); ok && !o.ReadAt.IsZero() {
		return ro.SaveRead(ctx, key, o.After, o.ReadAt)
	}
	return r.State.Save(ctx, key, o.After)
}

// removedState is a StateStore that remembers records removed (the read
// model), so that a state read before the removal is not taken for new.
type removedState interface {
	// Removed reports whether the record was removed and when its
	// removal was confirmed.
	Removed(ctx context.Context, key string) (at time.Time, removed bool, err error)
}

func (r *Recorder) removed(ctx context.Context, key string) (time.Time, bool, error) {
	rs, ok := r.State.(removedState)
	if !ok {
		return time.Time{}, false, nil
	}
	at, gone, err := rs.Removed(ctx, key)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("removed state of %s: %w", key, err)
	}
	return at, gone, nil
}

func (r *Recorder) lock(key string) *sync.Mutex {
	r.once.Do(func() { r.seed = maphash.MakeSeed() })
	return &r.locks[maphash.String(r.seed, key)%uint64(len(r.locks))]
}

// StateKey is the StateStore key of a record.
func StateKey(t practice.Tenant, k practice.Kind, id string) string {
	return t.String() + "/" + string(k) + "/" + id
}

// ChangeID is chg_ and a digest of the record, its version and its new
// state: the same change seen twice (a vendor retry, two instances) gets
// the same id.
func ChangeID(t practice.Tenant, k practice.Kind, id, version string, after []byte) string {
	h := sha256.New()
	for _, s := range []string{t.String(), string(k), id, version} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(after)
	return "chg_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// StateChangeID is the change id of a record's new state: derived from
// the firm, the record and the state's bytes (which hold its version
// and updated time), never from how or when it was noticed.
func StateChangeID(t practice.Tenant, k practice.Kind, id string, after []byte) string {
	return ChangeID(t, k, id, "", after)
}

// Older reports whether state a is older than state b by what the vendor
// publishes of its records: the version, then updated_at. States that
// publish neither, or the same of both, are not ordered.
func Older(a, b []byte) bool {
	va, vb := stamp(a), stamp(b)
	switch {
	case va.Version != 0 && vb.Version != 0 && va.Version != vb.Version:
		return va.Version < vb.Version
	case !va.UpdatedAt.IsZero() && !vb.UpdatedAt.IsZero():
		return va.UpdatedAt.Before(vb.UpdatedAt)
	}
	return false
}

// Undated reports whether a state publishes no modification time: two
// of its states are ordered by the version alone, or by when they were
// read (Karbon's users publish neither).
func Undated(raw []byte) bool { return stamp(raw).UpdatedAt.IsZero() }

type stamped struct {
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

func stamp(raw []byte) stamped {
	var s stamped
	_ = json.Unmarshal(raw, &s)
	return s
}

// ParseStateKey reads a key StateKey made; ok is false for any other key
// the store keeps (a vendor's refresh token).
func ParseStateKey(key string) (t practice.Tenant, k practice.Kind, id string, ok bool) {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) != 4 || parts[0] == "" || parts[3] == "" {
		return t, k, "", false
	}
	switch parts[1] {
	case "live":
	case "sandbox":
		t.Sandbox = true
	default:
		return t, k, "", false
	}
	k = practice.Kind(parts[2])
	if k.IDPrefix() == "" {
		return practice.Tenant{}, "", "", false
	}
	t.Firm = parts[0]
	return t, k, parts[3], true
}
