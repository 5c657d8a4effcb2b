package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"
)

// Last returns the last state an upstream adapter saw of a record (nil if
// never seen), so a vendor's change notification can be compared with it.
func (s *Store) Last(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket([]byte(bucketUpstream)).Get([]byte(key)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	return out, err
}

// Save records the state an upstream adapter has now seen of a record.
func (s *Store) Save(_ context.Context, key string, state []byte) error {
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketUpstream)).Put([]byte(key), state) })
}
