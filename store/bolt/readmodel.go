package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// The read model (practice/readmodel): each firm's synchronized records,
// the syncs' checkpoints and the leases that let one sync run at a time.
//
//	gw_readmodel/<firm>/<kind>   record id -> its /v1 JSON
//	gw_readmodel_checkpoints     name -> the sync's checkpoint
//	gw_readmodel_leases          name -> {holder, expires}
//	gw_readmodel_fences          <firm> NUL <name> -> the fence's generation
//
// There is no Feed: one process writes a bbolt file, and it applies its
// own updates to its model directly.
const (
	bucketReadModel   = "gw_readmodel"
	bucketCheckpoints = "gw_readmodel_checkpoints"
	bucketRMLeases    = "gw_readmodel_leases"
	bucketRMFences    = "gw_readmodel_fences"
)

// loadBatch bounds the records one read transaction copies out for Load:
// the caller's fn runs outside it, so a slow fn does not hold a read
// transaction, which would keep the file from growing for other writers.
const loadBatch = 1000

// ReadModel is the store's read model state. It is a view of Store rather
// than Store's own methods because Store's Lease and Release are the
// delivery queue's.
type ReadModel struct{ s *Store }

// ReadModel returns the read model's store, checkpoints and leases.
func (s *Store) ReadModel() *ReadModel { return &ReadModel{s: s} }

// Apply implements readmodel.Store: the firm's updates, in order, in one
// transaction.
func (m *ReadModel) Apply(ctx context.Context, firm string, us []readmodel.Update) error {
	if err := checkUpdates(firm, us); err != nil {
		return err
	}
	err := m.s.update(ctx, func(tx *bbolt.Tx) error { return applyUpdates(tx, firm, us) })
	if err != nil {
		return fmt.Errorf("applying %s's read model updates: %w", firm, err)
	}
	return nil
}

// applyUpdates writes a firm's updates, in order, in tx.
func applyUpdates(tx *bbolt.Tx, firm string, us []readmodel.Update) error {
	root := tx.Bucket([]byte(bucketReadModel))
	for _, u := range us {
		if len(u.Raw) == 0 {
			b := root.Bucket([]byte(firm))
			if b != nil {
				b = b.Bucket([]byte(u.Kind))
			}
			if b == nil {
				continue
			}
			if err := b.Delete([]byte(u.ID)); err != nil {
				return err
			}
			continue
		}
		fb, err := root.CreateBucketIfNotExists([]byte(firm))
		if err != nil {
			return err
		}
		kb, err := fb.CreateBucketIfNotExists([]byte(u.Kind))
		if err != nil {
			return err
		}
		if err := kb.Put([]byte(u.ID), u.Raw); err != nil {
			return err
		}
	}
	return nil
}

// Load implements readmodel.Store, loadBatch records per read
// transaction.
func (m *ReadModel) Load(ctx context.Context, firm string, fn func(readmodel.Update) error) error {
	for _, kind := range practice.Kinds {
		var after []byte
		for {
			var batch []readmodel.Update
			err := m.s.view(ctx, func(tx *bbolt.Tx) error {
				b := tx.Bucket([]byte(bucketReadModel)).Bucket([]byte(firm))
				if b != nil {
					b = b.Bucket([]byte(kind))
				}
				if b == nil {
					return nil
				}
				c := b.Cursor()
				k, v := c.First()
				if after != nil {
					k, v = c.Seek(after)
					if bytes.Equal(k, after) {
						k, v = c.Next()
					}
				}
				for ; k != nil && len(batch) < loadBatch; k, v = c.Next() {
					batch = append(batch, readmodel.Update{Kind: kind, ID: string(k), Raw: bytes.Clone(v)})
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("loading %s's read model: %w", firm, err)
			}
			for _, u := range batch {
				if err := fn(u); err != nil {
					return err
				}
			}
			if len(batch) < loadBatch {
				break
			}
			after = []byte(batch[len(batch)-1].ID)
		}
	}
	return nil
}

// checkUpdates refuses what Load could not give back: Load reads the
// kinds in practice.Kinds, as the Redis store does.
func checkUpdates(firm string, us []readmodel.Update) error {
	if firm == "" {
		return fmt.Errorf("read model update without a firm")
	}
	for _, u := range us {
		if !slices.Contains(practice.Kinds, u.Kind) || u.ID == "" {
			return fmt.Errorf("read model update of %s %q: not a record", u.Kind, u.ID)
		}
	}
	return nil
}

// Checkpoint implements readmodel.Checkpoints.
func (m *ReadModel) Checkpoint(ctx context.Context, name string) ([]byte, error) {
	var out []byte
	err := m.s.view(ctx, func(tx *bbolt.Tx) error {
		if v := tx.Bucket([]byte(bucketCheckpoints)).Get([]byte(name)); v != nil {
			// Cloned, not appended to nil: a saved empty value is not
			// "nothing saved".
			out = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %s: %w", name, err)
	}
	return out, nil
}

// SaveCheckpoint implements readmodel.Checkpoints.
func (m *ReadModel) SaveCheckpoint(ctx context.Context, name string, value []byte) error {
	err := m.s.update(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketCheckpoints)).Put([]byte(name), value)
	})
	if err != nil {
		return fmt.Errorf("saving checkpoint %s: %w", name, err)
	}
	return nil
}

// SaveHeldCheckpoint implements readmodel.Checkpoints: the lease is read
// by the store's clock in the transaction that writes the checkpoint.
func (m *ReadModel) SaveHeldCheckpoint(ctx context.Context, name string, value []byte, lease, holder string) (bool, error) {
	var ok bool
	err := m.s.update(ctx, func(tx *bbolt.Tx) (err error) {
		ok, err = m.saveHeldLocked(tx, name, value, lease, holder)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("saving checkpoint %s: %w", name, err)
	}
	return ok, nil
}

// saveHeldLocked writes checkpoint name in tx when holder holds lease by
// the store's clock, and reports whether it did.
func (m *ReadModel) saveHeldLocked(tx *bbolt.Tx, name string, value []byte, lease, holder string) (bool, error) {
	var cur leaseRecord
	if _, err := getJSON(tx.Bucket([]byte(bucketRMLeases)), lease, &cur); err != nil {
		return false, err
	}
	if holder == "" || cur.Holder != holder || m.s.now().UnixNano() >= cur.Expires {
		return false, nil
	}
	return true, tx.Bucket([]byte(bucketCheckpoints)).Put([]byte(name), value)
}

type leaseRecord struct {
	Holder string `json:"holder"`
	// Expires is in Unix nanoseconds by the store's clock.
	Expires int64 `json:"expires"`
}

// Lease implements readmodel.Leases, by the store's clock. A lease is
// held until its expiry, as a Redis key with a TTL is.
func (m *ReadModel) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if holder == "" || ttl < time.Millisecond {
		return false, fmt.Errorf("lease %s: a holder and a ttl of at least 1ms are required", name)
	}
	var ok bool
	err := m.s.update(ctx, func(tx *bbolt.Tx) error {
		ok = false
		b := tx.Bucket([]byte(bucketRMLeases))
		// Read in the transaction: a group commit may run it later than
		// it was asked for.
		now := m.s.now()
		var cur leaseRecord
		if _, err := getJSON(b, name, &cur); err != nil {
			return err
		}
		if cur.Holder != "" && cur.Holder != holder && now.UnixNano() < cur.Expires {
			return nil
		}
		ok = true
		// Whole milliseconds, as Redis keeps a TTL.
		return putJSON(b, name, leaseRecord{Holder: holder, Expires: now.Add(ttl.Truncate(time.Millisecond)).UnixNano()})
	})
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	return ok, nil
}

// Release implements readmodel.Leases.
func (m *ReadModel) Release(ctx context.Context, name, holder string) error {
	err := m.s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketRMLeases))
		var cur leaseRecord
		if _, err := getJSON(b, name, &cur); err != nil {
			return err
		}
		if cur.Holder != holder {
			return nil
		}
		return b.Delete([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("releasing lease %s: %w", name, err)
	}
	return nil
}

// Interface guards.
var (
	_ readmodel.Store       = (*ReadModel)(nil)
	_ readmodel.Checkpoints = (*ReadModel)(nil)
	_ readmodel.Leases      = (*ReadModel)(nil)
)

// Purge implements readmodel.Purger: the kinds' buckets of the firm and
// the checkpoints, in one transaction.
func (m *ReadModel) Purge(ctx context.Context, firm string, kinds []practice.Kind, checkpoints []string) error {
	err := m.s.update(ctx, func(tx *bbolt.Tx) error {
		if fb := tx.Bucket([]byte(bucketReadModel)).Bucket([]byte(firm)); fb != nil {
			for _, k := range kinds {
				if err := fb.DeleteBucket([]byte(k)); err != nil && !errors.Is(err, bbolt.ErrBucketNotFound) {
					return err
				}
			}
		}
		cp := tx.Bucket([]byte(bucketCheckpoints))
		for _, name := range checkpoints {
			if err := cp.Delete([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("purging %s's read model: %w", firm, err)
	}
	return nil
}

// fenceKey is f's key in the fences bucket.
func fenceKey(f readmodel.Fence) []byte { return []byte(f.Firm + "\x00" + f.Name) }

// fenced reports whether f's generation is below its fence, in tx.
func fenced(tx *bbolt.Tx, f readmodel.Fence) bool {
	v := tx.Bucket([]byte(bucketRMFences)).Get(fenceKey(f))
	return len(v) == 8 && int64(binary.BigEndian.Uint64(v)) > f.Generation
}

// RaiseFence implements readmodel.Fencer.
func (m *ReadModel) RaiseFence(ctx context.Context, f readmodel.Fence) error {
	err := m.s.update(ctx, func(tx *bbolt.Tx) error {
		if fenced(tx, readmodel.Fence{Firm: f.Firm, Name: f.Name, Generation: f.Generation - 1}) {
			return nil // already at f.Generation or past it
		}
		return tx.Bucket([]byte(bucketRMFences)).Put(fenceKey(f), binary.BigEndian.AppendUint64(nil, uint64(f.Generation)))
	})
	if err != nil {
		return fmt.Errorf("raising fence %s of %s: %w", f.Name, f.Firm, err)
	}
	return nil
}

// ApplyFenced implements readmodel.Fencer. One process writes a bbolt
// file, so there is no head to write after: after is not read.
func (m *ReadModel) ApplyFenced(ctx context.Context, f readmodel.Fence, _ *string, us []readmodel.Update) (string, bool, error) {
	if err := checkUpdates(f.Firm, us); err != nil {
		return "", false, err
	}
	err := m.s.update(ctx, func(tx *bbolt.Tx) error {
		if fenced(tx, f) {
			return readmodel.ErrFenced
		}
		return applyUpdates(tx, f.Firm, us)
	})
	if err != nil {
		return "", false, fmt.Errorf("applying %s's read model updates: %w", f.Firm, err)
	}
	return "", true, nil
}

// SaveFencedCheckpoint implements readmodel.Fencer.
func (m *ReadModel) SaveFencedCheckpoint(ctx context.Context, f readmodel.Fence, name string, value []byte, lease, holder string) (bool, error) {
	var ok bool
	err := m.s.update(ctx, func(tx *bbolt.Tx) (err error) {
		if fenced(tx, f) {
			ok = false
			return readmodel.ErrFenced
		}
		ok, err = m.saveHeldLocked(tx, name, value, lease, holder)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("saving checkpoint %s: %w", name, err)
	}
	return ok, nil
}

var _ readmodel.Fencer = (*ReadModel)(nil)
