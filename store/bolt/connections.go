package bolt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/store/connection"
)

// Firms' connections and the consents awaited (store/connection):
//
//	gw_connections       connection id -> the connection's JSON
//	gw_authorizations    SHA-256 of the state (hex) -> the consent, its
//	                     PKCE verifier sealed, and once started the
//	                     SHA-256 of the browser's value
//	gw_consent_starts    SHA-256 of the start token (hex) -> the
//	                     consent's state, sealed
//
// Connections are never deleted (a disconnected one stays, for the firm to
// see) and number in the hundreds, so a list reads the bucket whole rather
// than keep a per-firm index. A consent is kept under its state's digest,
// and its start link under its token's, so that a copy of the file gives
// neither the state, the token, the browser's value nor the verifier.
const (
	bucketConnections    = "gw_connections"
	bucketAuthorizations = "gw_authorizations"
	bucketConsentStarts  = "gw_consent_starts"
)

func stateKey(state string) []byte { return []byte(connection.StateDigest(state)) }

// CreateConnection stores a new connection as version 1.
func (s *Store) CreateConnection(ctx context.Context, c connection.Connection) (connection.Connection, error) {
	if c.ID == "" {
		return connection.Connection{}, errors.New("create connection: no id")
	}
	c.Version = 1
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketConnections))
		if b.Get([]byte(c.ID)) != nil {
			return connection.ErrExists
		}
		return putJSON(b, c.ID, c)
	})
	if err != nil {
		return connection.Connection{}, fmt.Errorf("create connection %s: %w", c.ID, err)
	}
	return c, nil
}

// Connection returns the connection with id.
func (s *Store) Connection(ctx context.Context, id string) (connection.Connection, error) {
	var c connection.Connection
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		c, err = loadConnection(tx, id)
		return err
	})
	if err != nil {
		return connection.Connection{}, fmt.Errorf("connection %s: %w", id, err)
	}
	return c, nil
}

// Connections lists a firm's connections, or every firm's when firm is
// "", oldest first (by creation, then id).
func (s *Store) Connections(ctx context.Context, firm string) ([]connection.Connection, error) {
	out := []connection.Connection{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketConnections)).ForEach(func(k, v []byte) error {
			var c connection.Connection
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("decode connection %s: %w", k, err)
			}
			if firm == "" || c.Firm == firm {
				out = append(out, c)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("connections of %q: %w", firm, err)
	}
	slices.SortFunc(out, oldestFirst)
	return out, nil
}

func oldestFirst(a, b connection.Connection) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// UpdateConnection writes c if the stored version is still version, as
// version+1. A connection stays its firm's: a write that moves it is
// refused.
func (s *Store) UpdateConnection(ctx context.Context, c connection.Connection, version int64) (connection.Connection, error) {
	c.Version = version + 1
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		cur, err := loadConnection(tx, c.ID)
		if err != nil {
			return err
		}
		if cur.Version != version {
			return connection.ErrVersion
		}
		if cur.Firm != c.Firm {
			return fmt.Errorf("a connection cannot move from firm %s to %s", cur.Firm, c.Firm)
		}
		return putJSON(tx.Bucket([]byte(bucketConnections)), c.ID, c)
	})
	if err != nil {
		return connection.Connection{}, fmt.Errorf("update connection %s: %w", c.ID, err)
	}
	return c, nil
}

func loadConnection(tx *bbolt.Tx, id string) (connection.Connection, error) {
	var c connection.Connection
	ok, err := getJSON(tx.Bucket([]byte(bucketConnections)), id, &c)
	if err != nil {
		return connection.Connection{}, err
	}
	if !ok {
		return connection.Connection{}, connection.ErrNotFound
	}
	return c, nil
}

// SaveAuthorization keeps a and its start link until a.Expires
// (ExpireAuthorizations drops them after).
func (s *Store) SaveAuthorization(ctx context.Context, a connection.Authorization) error {
	v, err := connection.SealAuthorization(s.secrets, a)
	if err != nil {
		return err
	}
	start, err := connection.SealStart(s.secrets, a)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		if err := tx.Bucket([]byte(bucketConsentStarts)).Put(stateKey(a.Start), start); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketAuthorizations)).Put(stateKey(a.OAuthState), v)
	})
	if err != nil {
		return fmt.Errorf("save authorization of connection %s: %w", a.Connection, err)
	}
	return nil
}

// StartAuthorization takes the start link of token and binds its consent
// to browser in one transaction, so that a link starts one consent once.
// A link is spent even when its consent is gone.
func (s *Store) StartAuthorization(ctx context.Context, token, browser string, now time.Time) (connection.Authorization, error) {
	var (
		a     connection.Authorization
		found bool
	)
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		a, found = connection.Authorization{}, false
		starts, auths := tx.Bucket([]byte(bucketConsentStarts)), tx.Bucket([]byte(bucketAuthorizations))
		raw := bytes.Clone(starts.Get(stateKey(token)))
		if raw == nil {
			return nil
		}
		if err := starts.Delete(stateKey(token)); err != nil {
			return err
		}
		state, err := connection.OpenStart(s.secrets, token, raw, now)
		if errors.Is(err, connection.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rec := auths.Get(stateKey(state))
		if rec == nil {
			return nil
		}
		bound, err := connection.BindAuthorization(rec, browser, now)
		if errors.Is(err, connection.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if a, err = connection.OpenAuthorization(s.secrets, state, rec, now); err != nil {
			return err
		}
		found = true
		return auths.Put(stateKey(state), bound)
	})
	if err != nil {
		return connection.Authorization{}, fmt.Errorf("start authorization: %w", err)
	}
	if !found {
		return connection.Authorization{}, connection.ErrNotFound
	}
	return a, nil
}

// TakeAuthorization returns the consent of state and deletes it in the
// same transaction, so that it is used once, if browser started it; one
// another browser started is left as it was. One expired at now is
// deleted and not returned.
func (s *Store) TakeAuthorization(ctx context.Context, state, browser string, now time.Time) (connection.Authorization, error) {
	var raw []byte
	key := stateKey(state)
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketAuthorizations))
		raw = bytes.Clone(b.Get(key))
		switch {
		case raw == nil:
			return nil
		case !connection.Expired(raw, now) && !connection.BoundTo(raw, browser):
			return connection.ErrOtherBrowser
		}
		return b.Delete(key)
	})
	if errors.Is(err, connection.ErrOtherBrowser) {
		return connection.Authorization{}, err
	}
	if err != nil {
		return connection.Authorization{}, fmt.Errorf("take authorization: %w", err)
	}
	if raw == nil {
		return connection.Authorization{}, connection.ErrNotFound
	}
	return connection.OpenAuthorization(s.secrets, state, raw, now)
}

// ExpireAuthorizations drops the consents and start links whose time ran
// out by the store's clock: a consent abandoned at the vendor's page, or
// a link never opened, is never taken.
func (s *Store) ExpireAuthorizations(ctx context.Context) (int, error) {
	var n int
	now := s.now()
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		for _, bucket := range []string{bucketAuthorizations, bucketConsentStarts} {
			c := tx.Bucket([]byte(bucket)).Cursor()
			for k, v := c.First(); k != nil; {
				// A record that does not decode is dropped too: it could
				// never be taken.
				if !connection.Expired(v, now) {
					k, v = c.Next()
					continue
				}
				if err := c.Delete(); err != nil {
					return err
				}
				n++
				k, v = c.Seek(k)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire authorizations: %w", err)
	}
	return n, nil
}
