package bolt

import (
	"context"
	"encoding/binary"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// ClaimNotification takes a vendor notification's key until ttl passes, reporting
// false if it is taken (adapters/kit/notifications). The value is the expiry,
// in Unix nanoseconds on the store's clock.
func (s *Store) ClaimNotification(_ context.Context, key string, ttl time.Duration) (bool, error) {
	fresh := false
	now := s.now()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketNotices))
		if v := b.Get([]byte(key)); len(v) == 8 && now.UnixNano() < int64(binary.BigEndian.Uint64(v)) {
			return nil
		}
		fresh = true
		return b.Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(now.Add(ttl).UnixNano())))
	})
	return fresh, err
}

// ReleaseNotification gives a notification's key back.
func (s *Store) ReleaseNotification(_ context.Context, key string) error {
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketNotices)).Delete([]byte(key)) })
}

// ExpireNotifications removes the keys whose claim has passed.
func (s *Store) ExpireNotifications(_ context.Context) (int, error) {
	n := 0
	now := s.now().UnixNano()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucketNotices)).Cursor()
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
