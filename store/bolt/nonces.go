package bolt

import (
	"context"
	"encoding/binary"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// Single-use claims that pass with their ttl: the nonces of forwarded
// requests taken (cluster.Nonces). A key's value is its claim's expiry,
// in Unix nanoseconds on the store's clock.

// ClaimNonce takes a forwarded request's nonce until ttl passes,
// reporting false if it was taken before.
func (s *Store) ClaimNonce(_ context.Context, nonce string, ttl time.Duration) (bool, error) {
	return s.claim(bucketNonces, nonce, ttl)
}

// ExpireNonces removes the nonces whose claim has passed.
func (s *Store) ExpireNonces(_ context.Context) (int, error) {
	return s.expireClaims(bucketNonces)
}

func (s *Store) claim(bucket, key string, ttl time.Duration) (bool, error) {
	fresh := false
	now := s.now()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if v := b.Get([]byte(key)); len(v) == 8 && now.UnixNano() < int64(binary.BigEndian.Uint64(v)) {
			return nil
		}
		fresh = true
		return b.Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(now.Add(ttl).UnixNano())))
	})
	return fresh, err
}

func (s *Store) expireClaims(bucket string) (int, error) {
	n := 0
	now := s.now().UnixNano()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucket)).Cursor()
		for k, v := c.First(); k != nil; {
			if len(v) == 8 && now < int64(binary.BigEndian.Uint64(v)) {
				k, v = c.Next()
				continue
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
			k, v = c.Seek(k)
		}
		return nil
	})
	return n, err
}
