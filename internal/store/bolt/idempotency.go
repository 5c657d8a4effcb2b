package bolt

import (
	"context"
	"encoding/json"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/internal/idempotency"
)

// Begin reserves an idempotency key, or returns what it already holds.
func (s *Store) Begin(_ context.Context, key, fingerprint string) (*idempotency.Record, error) {
	var prior *idempotency.Record
	now := s.now()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdempotency))
		if v := b.Get([]byte(key)); v != nil {
			var rec idempotency.Record
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			if now.Sub(rec.CreatedAt) < idempotency.TTL {
				prior = &rec
				return nil
			}
		}
		v, _ := json.Marshal(idempotency.Record{Fingerprint: fingerprint, CreatedAt: now})
		return b.Put([]byte(key), v)
	})
	return prior, err
}

// Finish stores the answer to replay. The key keeps the time it was
// reserved, so that it is remembered for the TTL from its first request
// (as Redis keeps the key's expiry); a key no longer reserved (expired,
// abandoned) is not brought back.
func (s *Store) Finish(_ context.Context, key string, rec idempotency.Record) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdempotency))
		v := b.Get([]byte(key))
		if v == nil {
			return nil
		}
		var reserved idempotency.Record
		if err := json.Unmarshal(v, &reserved); err != nil {
			return err
		}
		rec.CreatedAt = reserved.CreatedAt
		nv, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), nv)
	})
}

// Abandon releases a key whose request failed before it changed anything,
// so that a retry can run.
func (s *Store) Abandon(_ context.Context, key string) error {
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketIdempotency)).Delete([]byte(key)) })
}

// ExpireIdempotency removes keys older than the TTL.
func (s *Store) ExpireIdempotency(_ context.Context) (int, error) {
	n := 0
	now := s.now()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdempotency))
		c := b.Cursor()
		for k, v := c.First(); k != nil; {
			var rec idempotency.Record
			if json.Unmarshal(v, &rec) == nil && now.Sub(rec.CreatedAt) < idempotency.TTL {
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
