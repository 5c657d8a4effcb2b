package bolt

import (
	"context"
	"encoding/json"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/store/idempotency"
)

// Begin reserves an idempotency key, or returns what it already holds.
func (s *Store) Begin(_ context.Context, key, fingerprint string) (*idempotency.Record, error) {
	var prior *idempotency.Record
	now := s.now()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdempotency))
		if v := b.Get([]byte(key)); v != nil {
			rec, err := idempotency.Open(s.secrets, key, v)
			if err != nil {
				return err
			}
			ttl := idempotency.TTL
			if !rec.Done() {
				ttl = s.inFlight
			}
			if now.Sub(rec.CreatedAt) < ttl {
				prior = &rec
				return nil
			}
		}
		v, err := idempotency.Seal(s.secrets, key, idempotency.Record{Fingerprint: fingerprint, CreatedAt: now})
		if err != nil {
			return err
		}
		return b.Put([]byte(key), v)
	})
	return prior, err
}

// Finish stores the answer to replay, sealed, remembered for the TTL from
// now, as Redis does; a key no longer reserved (released after InFlight,
// abandoned) is not brought back.
func (s *Store) Finish(_ context.Context, key string, rec idempotency.Record) error {
	rec.CreatedAt = s.now()
	v, err := idempotency.Seal(s.secrets, key, rec)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdempotency))
		if b.Get([]byte(key)) == nil {
			return nil
		}
		return b.Put([]byte(key), v)
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
