package readmodel

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/internal/practice"
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
	Tombstones(ctx context.Context, firm string, k practice.Kind, q TombstoneQuery) ([]practice.Tombstone, error)
}

// TombstoneQuery selects tombstones as a collection page selects records:
// after an id, in id order.
type TombstoneQuery struct {
	Since time.Time // zero: every tombstone kept
	After string    // "" from the first
	Limit int
}

// noteRemovals keeps a tombstone for each removal among us and forgets
// the tombstone of each record us writes, before us reaches the model:
// a tombstone listed while its record is still served is dropped by the
// reader (a record and its tombstone never both answer), whereas one
// lost after the record was removed would never be listed. The last
// state is read from memory, which the caller has not changed yet.
func (m *Model) noteRemovals(ctx context.Context, us []Update) error {
	if m.tombstones == nil {
		return nil
	}
	removed := map[practice.Kind][]practice.Tombstone{}
	written := map[practice.Kind][]string{}
	for _, u := range us {
		if u.Raw != nil {
			written[u.Kind] = append(written[u.Kind], u.ID)
			continue
		}
		km, ok := m.kinds[u.Kind]
		if !ok {
			continue
		}
		before := m.find(km, u.ID)
		if before == nil {
			continue // never here: nothing for a mirror to remove
		}
		at := u.At
		if at.IsZero() {
			at = time.Now()
		}
		removed[u.Kind] = append(removed[u.Kind], practice.NewTombstone(u.Kind, u.ID, bytes.Clone(before), at))
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

// Tombstones lists the tombstones of k's removed records, for a
// collection read with include_deleted. The reader drops a tombstone
// whose record it also lists.
func (m *Model) Tombstones(ctx context.Context, t practice.Tenant, k practice.Kind, q TombstoneQuery) ([]practice.Tombstone, error) {
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
