// Package boltstore keeps the gateway's own state (credentials, signing
// keys, idempotency keys, hourly usage) in the embedded bbolt database, for
// a gateway that runs alone.
package boltstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/internal/idempotency"
)

var (
	bucketCredentials = []byte("gw_credentials")
	bucketKeys        = []byte("gw_signing_keys")
	bucketIdempotency = []byte("gw_idempotency")
	bucketUsage       = []byte("gw_usage")
)

// Store is the embedded gateway state.
type Store struct {
	db  *bolt.DB
	now func() time.Time
}

// New prepares the store's buckets in db.
func New(db *bolt.DB, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketCredentials, bucketKeys, bucketIdempotency, bucketUsage, bucketUpstream} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating gateway buckets: %w", err)
	}
	return &Store{db: db, now: now}, nil
}

// SaveCredential implements auth.Store.
func (s *Store) SaveCredential(_ context.Context, c *auth.Credential) error {
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCredentials).Put([]byte(c.ID), v)
	})
}

// Credential implements auth.Store.
func (s *Store) Credential(_ context.Context, id string) (*auth.Credential, error) {
	var c *auth.Credential
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCredentials).Get([]byte(id))
		if v == nil {
			return auth.ErrNotFound
		}
		c = new(auth.Credential)
		return json.Unmarshal(v, c)
	})
	return c, err
}

// Credentials implements auth.Store; an empty firm lists every firm's.
func (s *Store) Credentials(_ context.Context, firm string) ([]*auth.Credential, error) {
	var out []*auth.Credential
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCredentials).ForEach(func(_, v []byte) error {
			c := new(auth.Credential)
			if err := json.Unmarshal(v, c); err != nil {
				return err
			}
			if firm == "" || c.Firm == firm {
				out = append(out, c)
			}
			return nil
		})
	})
	return out, err
}

// TouchCredentials implements auth.Store.
func (s *Store) TouchCredentials(_ context.Context, lastUsed map[string]time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCredentials)
		for id, at := range lastUsed {
			v := b.Get([]byte(id))
			if v == nil {
				continue
			}
			var c auth.Credential
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			if c.LastUsedAt != nil && !at.After(*c.LastUsedAt) {
				continue
			}
			c.LastUsedAt = &at
			nv, err := json.Marshal(&c)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(id), nv); err != nil {
				return err
			}
		}
		return nil
	})
}

// SigningKey returns the gateway's generated signing key, creating it the
// first time. It is used when the configuration names no key.
func (s *Store) SigningKey(_ context.Context) (auth.SigningKey, error) {
	var key auth.SigningKey
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		if k, v := b.Cursor().First(); k != nil {
			key = auth.SigningKey{ID: string(k), Secret: append([]byte(nil), v...)}
			return nil
		}
		secret := make([]byte, 32)
		rand.Read(secret)
		key = auth.SigningKey{ID: "generated-" + s.now().UTC().Format("20060102"), Secret: secret}
		return b.Put([]byte(key.ID), secret)
	})
	return key, err
}

// Begin reserves an idempotency key, or returns what it already holds.
func (s *Store) Begin(_ context.Context, key, fingerprint string) (*idempotency.Record, error) {
	var prior *idempotency.Record
	now := s.now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIdempotency)
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

// Finish stores the answer to replay.
func (s *Store) Finish(_ context.Context, key string, rec idempotency.Record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketIdempotency).Put([]byte(key), v) })
}

// Abandon releases a key whose request failed before it changed anything,
// so that a retry can run.
func (s *Store) Abandon(_ context.Context, key string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketIdempotency).Delete([]byte(key)) })
}

// ExpireIdempotency removes keys older than the TTL.
func (s *Store) ExpireIdempotency(_ context.Context) (int, error) {
	n := 0
	now := s.now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIdempotency)
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
	return s.db.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUsage)
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

// HourUsage is one hour of one credential's traffic.
type HourUsage = ratelimit.HourUsage

// usageRetention is how much hourly usage is kept: the console shows 7
// days.
const usageRetention = 8 * 24 * time.Hour

// Usage returns a credential's hourly counters since a time.
func (s *Store) Usage(_ context.Context, credentialID string, since time.Time) ([]HourUsage, error) {
	var out []HourUsage
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketUsage).Cursor()
		prefix := append([]byte(credentialID), 0)
		for k, v := c.Seek(usageKey(credentialID, since.Truncate(time.Hour))); k != nil && len(k) == len(prefix)+8 && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			if len(v) != 16 {
				return errors.New("corrupt usage counter")
			}
			out = append(out, HourUsage{
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
	cutoff := uint64(s.now().Add(-usageRetention).Unix())
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketUsage).Cursor()
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

var (
	_ auth.Store           = (*Store)(nil)
	_ ratelimit.UsageStore = (*Store)(nil)
)

var bucketUpstream = []byte("gw_upstream_state")

// Last returns the last state an upstream adapter saw of a record (nil if
// never seen), so a vendor's change notification can be compared with it.
func (s *Store) Last(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketUpstream).Get([]byte(key)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	return out, err
}

// Save records the state an upstream adapter has now seen of a record.
func (s *Store) Save(_ context.Context, key string, state []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketUpstream).Put([]byte(key), state) })
}
