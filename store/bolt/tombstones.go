package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// Tombstones of records removed from firms' read models:
//
//	gw_readmodel_tombstones/<firm>/<kind>   record id -> its tombstone's JSON
//
// Keyed by id, as the records are, so a listing pages them in the order
// it pages records. The bucket is made by the first write, so an older
// file opens as it is.
const bucketTombstones = "gw_readmodel_tombstones"

// Tombstones is the store's readmodel.TombstoneStore.
type Tombstones struct{ s *Store }

// Tombstones returns the store's tombstones of removed records.
func (s *Store) Tombstones() *Tombstones { return &Tombstones{s: s} }

// PutTombstones implements readmodel.TombstoneStore.
func (ts *Tombstones) PutTombstones(ctx context.Context, firm string, k practice.Kind, tombs []practice.Tombstone) error {
	if len(tombs) == 0 {
		return nil
	}
	err := ts.s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := createPath(tx, bucketTombstones, firm, string(k))
		if err != nil {
			return err
		}
		for _, t := range tombs {
			v, err := json.Marshal(t)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(t.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("keeping %s's %s tombstones: %w", firm, k, err)
	}
	return nil
}

// DropTombstones implements readmodel.TombstoneStore. Nearly every write
// of a record has no tombstone to drop, so a read transaction looks
// first and only a record that comes back pays for a write.
func (ts *Tombstones) DropTombstones(ctx context.Context, firm string, k practice.Kind, ids []string) error {
	var found []string
	err := ts.s.view(ctx, func(tx *bbolt.Tx) error {
		if b := bucketAt(tx, bucketTombstones, firm, string(k)); b != nil {
			for _, id := range ids {
				if b.Get([]byte(id)) != nil {
					found = append(found, id)
				}
			}
		}
		return nil
	})
	if err != nil || len(found) == 0 {
		return err
	}
	err = ts.s.update(ctx, func(tx *bbolt.Tx) error {
		b := bucketAt(tx, bucketTombstones, firm, string(k))
		if b == nil {
			return nil
		}
		for _, id := range found {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dropping %s's %s tombstones: %w", firm, k, err)
	}
	return nil
}

// Tombstones implements readmodel.TombstoneStore.
func (ts *Tombstones) Tombstones(ctx context.Context, firm string, k practice.Kind, q practice.TombstoneQuery) ([]practice.Tombstone, error) {
	var out []practice.Tombstone
	err := ts.s.view(ctx, func(tx *bbolt.Tx) error {
		b := bucketAt(tx, bucketTombstones, firm, string(k))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		key, v := c.First()
		if q.After != "" {
			key, v = c.Seek([]byte(q.After))
			if bytes.Equal(key, []byte(q.After)) {
				key, v = c.Next()
			}
		}
		for ; key != nil && len(out) < q.Limit; key, v = c.Next() {
			var t practice.Tombstone
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("tombstone %s: %w", key, err)
			}
			if t.DeletedAt.Before(q.Since) {
				continue
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s's %s tombstones: %w", firm, k, err)
	}
	return out, nil
}

// SweepTombstones removes the firm's tombstones deleted before before and
// returns how many it removed.
func (ts *Tombstones) SweepTombstones(ctx context.Context, firm string, before time.Time) (int, error) {
	n := 0
	err := ts.s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		fb := bucketAt(tx, bucketTombstones, firm)
		if fb == nil {
			return nil
		}
		for _, k := range practice.Kinds {
			b := fb.Bucket([]byte(k))
			if b == nil {
				continue
			}
			var old [][]byte
			err := b.ForEach(func(key, v []byte) error {
				var t practice.Tombstone
				// An unreadable tombstone is swept too: nothing could list it.
				if json.Unmarshal(v, &t) != nil || t.DeletedAt.Before(before) {
					old = append(old, bytes.Clone(key))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, key := range old {
				if err := b.Delete(key); err != nil {
					return err
				}
			}
			n += len(old)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweeping %s's tombstones: %w", firm, err)
	}
	return n, nil
}

// createPath opens nested buckets, making those missing.
func createPath(tx *bbolt.Tx, names ...string) (*bbolt.Bucket, error) {
	b, err := tx.CreateBucketIfNotExists([]byte(names[0]))
	for _, name := range names[1:] {
		if err != nil {
			return nil, err
		}
		b, err = b.CreateBucketIfNotExists([]byte(name))
	}
	return b, err
}

// bucketAt opens nested buckets, nil when one is missing.
func bucketAt(tx *bbolt.Tx, names ...string) *bbolt.Bucket {
	b := tx.Bucket([]byte(names[0]))
	for _, name := range names[1:] {
		if b == nil {
			return nil
		}
		b = b.Bucket([]byte(name))
	}
	return b
}

var _ readmodel.TombstoneStore = (*Tombstones)(nil)
