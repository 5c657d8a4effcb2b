package bolt

import (
	"bytes"
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// Every upstream state value is sealed, bound to the key it is kept
// under: the bucket holds vendors' rotated refresh tokens (which grant
// access to a firm's systems) beside states that grant nothing (XPM's
// first-seen stamps, records' last states). Sealing them all costs one
// AES-GCM step per read or write and spares every adapter from having to
// say which of its values are secret, so none can be forgotten.
func whatUpstream(key string) string { return "upstream-state:" + key }

// Last returns the last state an upstream adapter saw of a record (nil if
// never seen), so a vendor's change notification can be compared with it.
func (s *Store) Last(_ context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		v = bytes.Clone(tx.Bucket([]byte(bucketUpstream)).Get([]byte(key)))
		return nil
	})
	if err != nil || v == nil {
		return nil, err
	}
	state, err := s.secrets.Open(v, whatUpstream(key))
	if err != nil {
		return nil, fmt.Errorf("upstream state %s: %w", key, err)
	}
	return state, nil
}

// Save records the state an upstream adapter has now seen of a record.
func (s *Store) Save(_ context.Context, key string, state []byte) error {
	v := s.secrets.Seal(state, whatUpstream(key))
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketUpstream)).Put([]byte(key), v) })
}

// sealUpstreamState seals the upstream state an earlier version stored in
// plain text. It runs when the file is opened, before any read: bbolt
// locks the file to one process, so nothing plain is written after it.
func sealUpstreamState(tx *bbolt.Tx, key *sealed.Key) error {
	return sealPlain(tx.Bucket([]byte(bucketUpstream)), key, whatUpstream)
}

// sealPlain seals, in place, every value of b an earlier version stored
// in plain text, each bound to what its key names.
func sealPlain(b *bbolt.Bucket, key *sealed.Key, what func(string) string) error {
	var plain [][2][]byte
	if err := b.ForEach(func(k, v []byte) error {
		if !sealed.IsSealed(v) {
			plain = append(plain, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		}
		return nil
	}); err != nil {
		return err
	}
	for _, kv := range plain {
		if err := b.Put(kv[0], key.Seal(kv[1], what(string(kv[0])))); err != nil {
			return err
		}
	}
	return nil
}

// Forget removes every upstream state whose key starts with prefix: what
// an adapter kept of an organisation a firm no longer serves.
func (s *Store) Forget(_ context.Context, prefix string) error {
	if prefix == "" {
		return changes.ErrForgetAll
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketUpstream))
		// Collected first: a cursor's Next after its Delete can skip
		// the key that follows.
		var gone [][]byte
		c := b.Cursor()
		for k, _ := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, _ = c.Next() {
			gone = append(gone, bytes.Clone(k))
		}
		for _, k := range gone {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// SaveFenced implements readmodel.FencedState: the fence, kept with the
// read model, is read in the transaction that saves.
func (s *Store) SaveFenced(_ context.Context, f readmodel.Fence, key string, state []byte) error {
	v := s.secrets.Seal(state, whatUpstream(key))
	return s.db.Update(func(tx *bbolt.Tx) error {
		if fenced(tx, f) {
			return fmt.Errorf("upstream state %s: %w", key, readmodel.ErrFenced)
		}
		return tx.Bucket([]byte(bucketUpstream)).Put([]byte(key), v)
	})
}

// Swap implements changes.Swapper: the state is compared and saved in
// one transaction.
func (s *Store) Swap(_ context.Context, key string, old, state []byte) (bool, error) {
	return s.swap(nil, key, old, state)
}

// SwapFenced implements readmodel.FencedSwapper.
func (s *Store) SwapFenced(_ context.Context, f readmodel.Fence, key string, old, state []byte) (bool, error) {
	return s.swap(&f, key, old, state)
}

func (s *Store) swap(f *readmodel.Fence, key string, old, state []byte) (bool, error) {
	v := s.secrets.Seal(state, whatUpstream(key))
	swapped := false
	err := s.db.Update(func(tx *bbolt.Tx) error {
		if f != nil && fenced(tx, *f) {
			return fmt.Errorf("upstream state %s: %w", key, readmodel.ErrFenced)
		}
		b := tx.Bucket([]byte(bucketUpstream))
		var cur []byte
		if raw := b.Get([]byte(key)); raw != nil {
			var err error
			if cur, err = s.secrets.Open(raw, whatUpstream(key)); err != nil {
				return fmt.Errorf("upstream state %s: %w", key, err)
			}
		}
		if (cur == nil) != (old == nil) || !bytes.Equal(cur, old) {
			return nil
		}
		swapped = true
		return b.Put([]byte(key), v)
	})
	return swapped, err
}

var (
	_ readmodel.FencedState   = (*Store)(nil)
	_ readmodel.FencedSwapper = (*Store)(nil)
	_ changes.Swapper         = (*Store)(nil)
)
