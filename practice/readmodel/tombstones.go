package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// A removed record's tombstone has one home: the model's own store, where
// the removal is written in place of the record's last state. There it
// orders what comes after (a state read before the removal does not bring
// the record back, on any instance, after any restart), every instance
// learns it through the shared feed, a mirror lists it with
// include_deleted, and the sweep forgets it after
// practice.TombstoneRetention.

// Tombstones lists the tombstones of k's removed records whose removal
// was confirmed at or after q.Since, after q.After, in id order, for a
// collection read with include_deleted.
func (m *Model) Tombstones(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.TombstoneQuery) ([]practice.Tombstone, error) {
	km, err := m.kind(t, k)
	if err != nil {
		return nil, err
	}
	since := q.Since.Truncate(time.Millisecond)
	var out []practice.Tombstone
	err = m.whileLoaded(ctx, m.catchUpForRead, func() {
		out = out[:0]
		for id, raw := range km.gone {
			if id <= q.After && q.After != "" {
				continue
			}
			ts := listed(k, id, raw)
			if ts.DeletedAt.IsZero() || ts.DeletedAt.Before(since) {
				// Undated: removed by a version that kept no time; the
				// sweep dates it, then it is listed.
				continue
			}
			out = append(out, ts)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b practice.Tombstone) int { return strings.Compare(a.ID, b.ID) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// listed is the tombstone a mirror sees of the model's: the one the
// removal's event carries. The model's keeps the last state's version,
// which is what NewTombstone reads.
func listed(k practice.Kind, id string, raw json.RawMessage) practice.Tombstone {
	var t tombstoneRecord
	_ = json.Unmarshal(raw, &t)
	return practice.NewTombstone(k, id, raw, t.RemovedAt)
}

// SweepTombstones forgets the tombstones of removals confirmed before
// before, and dates those an earlier version kept without a time (as
// removed now, so a mirror is told of them once more rather than never).
// It returns how many it forgot. Every instance may sweep: a sweep writes
// what any other would, and another instance's newer write of a record
// is never undone by it (the write lock and the feed order them).
func (m *Model) SweepTombstones(ctx context.Context, before, now time.Time) (int, error) {
	m.write.Lock()
	defer m.write.Unlock()
	if m.updates != nil {
		if err := m.followOrCatchUp(ctx); err != nil {
			return 0, fmt.Errorf("read model of %s: %w", m.tenant.Firm, err)
		}
	}
	for attempt := 1; ; attempt++ {
		us, forgot := m.sweepable(before, now)
		if len(us) == 0 {
			return 0, nil
		}
		written, err := m.persist(ctx, us, attempt)
		if err != nil {
			return 0, fmt.Errorf("read model of %s: sweeping tombstones: %w", m.tenant.Firm, err)
		}
		if !written {
			continue
		}
		m.mu.Lock()
		for _, u := range us {
			m.applyLocked(u, nil)
		}
		m.mu.Unlock()
		return forgot, nil
	}
}

// sweepable is what a sweep writes: nothing in place of each tombstone
// past its retention, a dated tombstone in place of each undated one.
func (m *Model) sweepable(before, now time.Time) (us []Update, forgot int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for k, km := range m.kinds {
		for id, raw := range km.gone {
			var t tombstoneRecord
			_ = json.Unmarshal(raw, &t)
			switch {
			case t.RemovedAt.IsZero():
				t.RemovedAt = now.UTC()
				dated, _ := json.Marshal(t)
				us = append(us, Update{Kind: k, ID: id, Raw: dated})
			case t.RemovedAt.Before(before):
				us = append(us, Update{Kind: k, ID: id})
				forgot++
			}
		}
	}
	return us, forgot
}

// removedAt is when a removal was confirmed: the time its tombstone
// keeps, else the update's, else now.
func removedAt(u Update) time.Time {
	var t tombstoneRecord
	if u.Raw != nil && json.Unmarshal(u.Raw, &t) == nil && !t.RemovedAt.IsZero() {
		return t.RemovedAt
	}
	if !u.At.IsZero() {
		return u.At
	}
	return time.Now()
}
