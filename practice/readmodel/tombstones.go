package readmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// TombstoneStore keeps the tombstones of records removed from firms' read
// models, so that a mirror polling a collection with include_deleted
// learns of removals as it learns of changes. It is shared as the model
// is (bbolt embedded, Redis scale-out), so every instance lists the same
// tombstones.
type TombstoneStore interface {
	// PutTombstones keeps tombstones of the firm's records of kind k,
	// replacing any kept for their ids.
	PutTombstones(ctx context.Context, firm string, k practice.Kind, ts []practice.Tombstone) error
	// DropTombstones forgets the tombstones of ids, records that exist
	// again; an id without one is no error.
	DropTombstones(ctx context.Context, firm string, k practice.Kind, ids []string) error
	// Tombstones returns up to q.Limit of k's tombstones whose id sorts
	// after q.After and that were deleted at or after q.Since, in id order.
	Tombstones(ctx context.Context, firm string, k practice.Kind, q practice.TombstoneQuery) ([]practice.Tombstone, error)
}

// noteRemovals keeps a tombstone for each record us leaves removed and
// forgets the tombstone of each record us leaves written, before us
// reaches the model: a tombstone listed while its record is still served
// is dropped by the reader (a record and its tombstone never both
// answer), whereas one lost after the record was removed would never be
// listed. us has passed newer, so a removal is the record's tombstone
// (or nil for a record not held); the caller holds write and has caught
// up, so a removal's last state is the one before it in us, else the
// model's.
func (m *Model) noteRemovals(ctx context.Context, us []Update) error {
	if m.tombstones == nil {
		return nil
	}
	type key struct {
		k  practice.Kind
		id string
	}
	last := map[key]json.RawMessage{} // the state before each update, as us goes
	final := map[key]*practice.Tombstone{}
	var order []key
	for _, u := range us {
		kk := key{u.Kind, u.ID}
		if _, seen := last[kk]; !seen {
			order = append(order, kk)
		}
		if u.Raw != nil && !isTombstone(u.Raw) {
			last[kk], final[kk] = u.Raw, nil
			continue
		}
		before, inBatch := last[kk]
		if !inBatch {
			if km, ok := m.kinds[u.Kind]; ok {
				before = m.find(km, u.ID)
			}
		}
		last[kk] = nil
		if before == nil {
			// Not here: nothing for a mirror to remove, and a tombstone
			// already kept (even by an earlier update of us) stays.
			continue
		}
		ts := practice.NewTombstone(u.Kind, u.ID, bytes.Clone(before), removedAt(u))
		final[kk] = &ts
	}
	removed := map[practice.Kind][]practice.Tombstone{}
	written := map[practice.Kind][]string{}
	for _, kk := range order {
		switch ts := final[kk]; {
		case ts != nil:
			removed[kk.k] = append(removed[kk.k], *ts)
		case last[kk] != nil:
			written[kk.k] = append(written[kk.k], kk.id)
		}
	}
	for k, ids := range written {
		if err := m.tombstones.DropTombstones(ctx, m.tenant.Firm, k, ids); err != nil {
			return fmt.Errorf("read model of %s: forget tombstones of %s: %w", m.tenant.Firm, k, err)
		}
	}
	for k, ts := range removed {
		if err := m.tombstones.PutTombstones(ctx, m.tenant.Firm, k, ts); err != nil {
			return fmt.Errorf("read model of %s: keep tombstones of %s: %w", m.tenant.Firm, k, err)
		}
	}
	return nil
}

// removedAt is when a removal was confirmed: the time its tombstone
// keeps, else the update's, else now.
func removedAt(u Update) time.Time {
	var ts tombstoneRecord
	if u.Raw != nil && json.Unmarshal(u.Raw, &ts) == nil && !ts.RemovedAt.IsZero() {
		return ts.RemovedAt
	}
	if !u.At.IsZero() {
		return u.At
	}
	return time.Now()
}

// Tombstones lists the tombstones of k's removed records, for a
// collection read with include_deleted. The reader drops a tombstone
// whose record it also lists.
func (m *Model) Tombstones(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.TombstoneQuery) ([]practice.Tombstone, error) {
	if _, err := m.kind(t, k); err != nil {
		return nil, err
	}
	if m.tombstones == nil {
		return nil, nil
	}
	ts, err := m.tombstones.Tombstones(ctx, m.tenant.Firm, k, q)
	if err != nil {
		return nil, fmt.Errorf("read model of %s: tombstones of %s: %w: %w", m.tenant.Firm, k, practice.ErrUnavailable, err)
	}
	return ts, nil
}
