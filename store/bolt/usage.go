package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/store/usage"
)

// usageKey orders a credential's hours together and in time order.
func usageKey(credentialID string, hour time.Time) []byte {
	k := make([]byte, 0, len(credentialID)+9)
	k = append(k, credentialID...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(hour.Unix()))
}

// AddUsage adds to a credential's counters for one hour. Batched with
// other writers so that many credentials' flushes share one fsync.
func (s *Store) AddUsage(_ context.Context, credentialID string, hour time.Time, admitted, refused int64) error {
	return s.db.Batch(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketUsage))
		k := usageKey(credentialID, hour.Truncate(time.Hour))
		var cur [16]byte
		if v := b.Get(k); len(v) == 16 {
			copy(cur[:], v)
		}
		binary.BigEndian.PutUint64(cur[:8], binary.BigEndian.Uint64(cur[:8])+uint64(admitted))
		binary.BigEndian.PutUint64(cur[8:], binary.BigEndian.Uint64(cur[8:])+uint64(refused))
		return b.Put(k, cur[:])
	})
}

// Usage returns a credential's hourly counters since a time.
func (s *Store) Usage(_ context.Context, credentialID string, since time.Time) ([]usage.Hour, error) {
	var out []usage.Hour
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucketUsage)).Cursor()
		prefix := append([]byte(credentialID), 0)
		for k, v := c.Seek(usageKey(credentialID, since.Truncate(time.Hour))); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			if len(v) != 16 {
				return errors.New("corrupt usage counter")
			}
			out = append(out, usage.Hour{
				Hour:     time.Unix(int64(binary.BigEndian.Uint64(k[len(prefix):])), 0).UTC(),
				Admitted: int64(binary.BigEndian.Uint64(v[:8])),
				Refused:  int64(binary.BigEndian.Uint64(v[8:])),
			})
		}
		return nil
	})
	return out, err
}

// ExpireUsage removes hourly counters older than the retention.
func (s *Store) ExpireUsage(_ context.Context) (int, error) {
	cutoff := uint64(s.now().Add(-usage.Retention).Unix())
	n := 0
	err := s.db.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucketUsage)).Cursor()
		for k, _ := c.First(); k != nil; {
			if len(k) < 8 || binary.BigEndian.Uint64(k[len(k)-8:]) >= cutoff {
				k, _ = c.Next()
				continue
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
			k, _ = c.Seek(k)
		}
		return nil
	})
	return n, err
}
