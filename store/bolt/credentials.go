package bolt

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/store/credential"
)

// SaveCredential implements auth.Store.
func (s *Store) SaveCredential(_ context.Context, c *credential.Credential) error {
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketCredentials)).Put([]byte(c.ID), v)
	})
}

// Credential implements auth.Store.
func (s *Store) Credential(_ context.Context, id string) (*credential.Credential, error) {
	var c *credential.Credential
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket([]byte(bucketCredentials)).Get([]byte(id))
		if v == nil {
			return credential.ErrNotFound
		}
		c = new(credential.Credential)
		return json.Unmarshal(v, c)
	})
	return c, err
}

// Credentials implements auth.Store; an empty firm lists every firm's.
func (s *Store) Credentials(_ context.Context, firm string) ([]*credential.Credential, error) {
	var out []*credential.Credential
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketCredentials)).ForEach(func(_, v []byte) error {
			c := new(credential.Credential)
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
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketCredentials))
		for id, at := range lastUsed {
			v := b.Get([]byte(id))
			if v == nil {
				continue
			}
			var c credential.Credential
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
// first time. It is used when the configuration names no key. It is stored
// sealed, bound to its id.
func (s *Store) SigningKey(_ context.Context) (credential.SigningKey, error) {
	var key credential.SigningKey
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketKeys))
		if k, v := b.Cursor().First(); k != nil {
			secret, err := s.secrets.Open(v, whatSigningKey(string(k)))
			if err != nil {
				return fmt.Errorf("signing key %s: %w", k, err)
			}
			key = credential.SigningKey{ID: string(k), Secret: secret}
			return nil
		}
		secret := make([]byte, 32)
		rand.Read(secret)
		key = credential.SigningKey{ID: "generated-" + s.now().UTC().Format("20060102"), Secret: secret}
		return b.Put([]byte(key.ID), s.secrets.Seal(secret, whatSigningKey(key.ID)))
	})
	return key, err
}
