package boltstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	bolt "go.etcd.io/bbolt"
)

// deliveryRecord stores what the delivery's API form leaves out: the
// tenant, where it sits in dispatch_due, and its lease.
type deliveryRecord struct {
	Delivery dispatcher.Delivery `json:"delivery"`
	Firm     string              `json:"firm"`
	// Due is its key time in dispatch_due; zero when it is not there.
	Due        time.Time `json:"due,omitzero"`
	LeaseToken string    `json:"lease_token,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Replay marks a failed delivery queued for one replay attempt.
	Replay bool `json:"replay,omitempty"`
}

func (r deliveryRecord) delivery() dispatcher.Delivery {
	d := r.Delivery
	d.Firm = r.Firm
	if d.Attempts == nil {
		d.Attempts = []dispatcher.Attempt{}
	}
	return d
}

func (r deliveryRecord) leased(now time.Time) bool {
	return r.LeaseToken != "" && r.LeaseUntil.After(now)
}

func loadDelivery(tx *bolt.Tx, id string) (deliveryRecord, error) {
	var rec deliveryRecord
	ok, err := getJSON(tx.Bucket([]byte(bucketDeliveries)), id, &rec)
	if err != nil {
		return rec, err
	}
	if !ok {
		return rec, dispatcher.ErrNotFound
	}
	return rec, nil
}

func saveDelivery(tx *bolt.Tx, rec deliveryRecord) error {
	return putJSON(tx.Bucket([]byte(bucketDeliveries)), rec.Delivery.ID, rec)
}

func dueKey(at time.Time, id string) []byte { return concat(timeKey(at), []byte(id)) }

// setDue files the delivery in dispatch_due at at, moving it if it was
// filed elsewhere. Times the key cannot hold (zero, before 1970) file it as
// due at once.
func setDue(tx *bolt.Tx, rec *deliveryRecord, at time.Time) error {
	if err := unsetDue(tx, rec); err != nil {
		return err
	}
	at = keyTime(timeKey(at))
	if err := tx.Bucket([]byte(bucketDue)).Put(dueKey(at, rec.Delivery.ID), []byte(rec.Delivery.EndpointID)); err != nil {
		return err
	}
	rec.Due = at
	return nil
}

func unsetDue(tx *bolt.Tx, rec *deliveryRecord) error {
	if rec.Due.IsZero() {
		return nil
	}
	if err := tx.Bucket([]byte(bucketDue)).Delete(dueKey(rec.Due, rec.Delivery.ID)); err != nil {
		return err
	}
	rec.Due = time.Time{}
	return nil
}

func targetPrefix(endpointID string) []byte { return []byte(endpointID + "\x00") }

func targetKey(d dispatcher.Delivery) []byte {
	return concat(targetPrefix(d.EndpointID), timeKey(d.CreatedAt), []byte(d.ID))
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Enqueue stores new deliveries in one transaction. Deliveries that exist,
// or whose endpoint was deleted meanwhile, are skipped.
func (s *Store) Enqueue(ctx context.Context, ds []dispatcher.Delivery) (int, error) {
	created := 0
	err := s.update(ctx, func(tx *bolt.Tx) error {
		created = 0
		dels := tx.Bucket([]byte(bucketDeliveries))
		endpoints := tx.Bucket([]byte(bucketEndpoints))
		byTarget := tx.Bucket([]byte(bucketDeliveriesByTarget))
		for _, d := range ds {
			if dels.Get([]byte(d.ID)) != nil || endpoints.Get([]byte(d.EndpointID)) == nil {
				continue
			}
			rec := deliveryRecord{Delivery: d, Firm: d.Firm}
			if err := setDue(tx, &rec, d.NextAttemptAt); err != nil {
				return err
			}
			if err := byTarget.Put(targetKey(d), []byte(d.State)); err != nil {
				return err
			}
			if err := saveDelivery(tx, rec); err != nil {
				return err
			}
			created++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("enqueue deliveries: %w", err)
	}
	return created, nil
}

// Claim leases due deliveries in due order. A read-only look comes first:
// an idle dispatcher polling an empty queue costs no write transaction (and
// no fsync).
func (s *Store) Claim(ctx context.Context, r dispatcher.ClaimRequest) ([]dispatcher.Claim, time.Time, error) {
	var first time.Time
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket([]byte(bucketDue)).Cursor().First(); k != nil {
			first = keyTime(k)
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	if first.IsZero() || first.After(r.Now) {
		return nil, first, nil
	}

	var claims []dispatcher.Claim
	var next time.Time
	// Accept reserves capacity in the caller, so this function must run
	// exactly once: never through db.Batch, which may retry it.
	err = s.update(ctx, func(tx *bolt.Tx) error {
		due := tx.Bucket([]byte(bucketDue))
		var take [][]byte
		c := due.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if keyTime(k).After(r.Now) {
				break
			}
			if len(take) >= r.Max {
				next = r.Now
				break
			}
			if r.Accept(string(v)) {
				take = append(take, bytes.Clone(k))
			}
		}
		for _, k := range take {
			id := string(k[8:])
			rec, err := loadDelivery(tx, id)
			if errors.Is(err, dispatcher.ErrNotFound) {
				if err := due.Delete(k); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if !rec.Due.Equal(keyTime(k)) {
				// A stale index entry; the record knows where it is filed.
				if err := due.Delete(k); err != nil {
					return err
				}
				continue
			}
			rec.LeaseToken, rec.LeaseUntil = newToken(), r.LeaseUntil
			if err := setDue(tx, &rec, r.LeaseUntil); err != nil {
				return err
			}
			if err := saveDelivery(tx, rec); err != nil {
				return err
			}
			claims = append(claims, dispatcher.Claim{
				Delivery: rec.delivery(),
				Lease:    dispatcher.Lease{DeliveryID: id, Token: rec.LeaseToken, Until: rec.LeaseUntil},
				Replay:   rec.Replay,
			})
		}
		if next.IsZero() {
			if k, _ := c.Seek(timeKey(r.Now.Add(time.Nanosecond))); k != nil {
				next = keyTime(k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	return claims, next, nil
}

// Release gives leases back without an attempt.
func (s *Store) Release(ctx context.Context, leases []dispatcher.Lease, notBefore time.Time) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		for _, l := range leases {
			rec, err := loadDelivery(tx, l.DeliveryID)
			if errors.Is(err, dispatcher.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if rec.LeaseToken != l.Token {
				continue
			}
			rec.LeaseToken, rec.LeaseUntil = "", time.Time{}
			if err := unsetDue(tx, &rec); err != nil {
				return err
			}
			if rec.Delivery.State.Active() || rec.Replay {
				if notBefore.After(rec.Delivery.NextAttemptAt) {
					rec.Delivery.NextAttemptAt = notBefore
				}
				if err := setDue(tx, &rec, rec.Delivery.NextAttemptAt); err != nil {
					return err
				}
			}
			if err := saveDelivery(tx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release deliveries: %w", err)
	}
	return nil
}

// Lease leases one delivery for a replay, whatever its state.
func (s *Store) Lease(ctx context.Context, id string, now, until time.Time) (dispatcher.Claim, error) {
	var claim dispatcher.Claim
	err := s.update(ctx, func(tx *bolt.Tx) error {
		rec, err := loadDelivery(tx, id)
		if err != nil {
			return err
		}
		if rec.leased(now) {
			return dispatcher.ErrBusy
		}
		rec.LeaseToken, rec.LeaseUntil = newToken(), until
		if err := setDue(tx, &rec, until); err != nil {
			return err
		}
		claim = dispatcher.Claim{
			Delivery: rec.delivery(),
			Lease:    dispatcher.Lease{DeliveryID: id, Token: rec.LeaseToken, Until: until},
			Replay:   rec.Replay,
		}
		return saveDelivery(tx, rec)
	})
	if err != nil {
		return dispatcher.Claim{}, fmt.Errorf("lease delivery %s: %w", id, err)
	}
	return claim, nil
}

// RecordAttempt appends an attempt and applies the new state in one transaction:
// the log never shows an attempt without its consequence or the reverse.
func (s *Store) RecordAttempt(ctx context.Context, l dispatcher.Lease, o dispatcher.Outcome) (dispatcher.Delivery, error) {
	var out dispatcher.Delivery
	err := s.update(ctx, func(tx *bolt.Tx) error {
		rec, err := loadDelivery(tx, l.DeliveryID)
		if err != nil {
			return err
		}
		if rec.LeaseToken != l.Token {
			return dispatcher.ErrLeaseLost
		}
		d := &rec.Delivery
		if o.Attempt != nil {
			d.Attempts = append(d.Attempts, *o.Attempt)
		}
		d.State, d.UpdatedAt = o.State, o.At
		rec.LeaseToken, rec.LeaseUntil, rec.Replay = "", time.Time{}, false
		if err := unsetDue(tx, &rec); err != nil {
			return err
		}
		d.NextAttemptAt = time.Time{}
		if o.State.Active() {
			d.NextAttemptAt = o.NextAttemptAt
			if err := setDue(tx, &rec, o.NextAttemptAt); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte(bucketDeliveriesByTarget)).Put(targetKey(*d), []byte(d.State)); err != nil {
			return err
		}
		out = rec.delivery()
		return saveDelivery(tx, rec)
	})
	if err != nil {
		return dispatcher.Delivery{}, fmt.Errorf("record attempt on %s: %w", l.DeliveryID, err)
	}
	return out, nil
}

// RequeueFailed queues one replay for each of an endpoint's failed
// deliveries created at or after since. It reads only that endpoint's
// index from since on.
func (s *Store) RequeueFailed(ctx context.Context, endpointID string, since, now time.Time) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		prefix := targetPrefix(endpointID)
		var ids []string
		c := tx.Bucket([]byte(bucketDeliveriesByTarget)).Cursor()
		for k, v := c.Seek(concat(prefix, timeKey(since))); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if dispatcher.State(v) == dispatcher.StateFailed {
				ids = append(ids, string(k[len(prefix)+8:]))
			}
		}
		for _, id := range ids {
			rec, err := loadDelivery(tx, id)
			if err != nil {
				return err
			}
			if rec.Replay || rec.leased(now) {
				continue
			}
			rec.Replay = true
			rec.Delivery.NextAttemptAt = now
			if err := setDue(tx, &rec, now); err != nil {
				return err
			}
			if err := saveDelivery(tx, rec); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue failed deliveries of %s: %w", endpointID, err)
	}
	return n, nil
}

// Delivery returns the delivery with id.
func (s *Store) Delivery(ctx context.Context, id string) (dispatcher.Delivery, error) {
	var d dispatcher.Delivery
	err := s.view(ctx, func(tx *bolt.Tx) error {
		rec, err := loadDelivery(tx, id)
		d = rec.delivery()
		return err
	})
	if err != nil {
		return dispatcher.Delivery{}, fmt.Errorf("delivery %s: %w", id, err)
	}
	return d, nil
}

// Deliveries pages through an endpoint's index, which is in creation
// order; the states filter reads the index value, not the record.
func (s *Store) Deliveries(ctx context.Context, q dispatcher.DeliveryQuery) (dispatcher.DeliveryPage, error) {
	prefix := targetPrefix(q.EndpointID)
	start := concat(prefix, timeKey(q.From))
	var after []byte
	if q.Cursor != "" {
		suffix, err := decodeCursor(q.Cursor)
		if err != nil {
			return dispatcher.DeliveryPage{}, err
		}
		after = concat(prefix, suffix)
		if bytes.Compare(after, start) > 0 {
			start = after
		}
	}
	var end []byte
	if !q.To.IsZero() {
		end = concat(prefix, timeKey(q.To))
	}
	limit := pageSize(q.Limit)

	var page dispatcher.DeliveryPage
	var lastKey []byte
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucketDeliveriesByTarget)).Cursor()
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if end != nil && bytes.Compare(k, end) >= 0 {
				break
			}
			if after != nil && bytes.Compare(k, after) <= 0 {
				continue
			}
			if len(q.States) > 0 && !hasState(q.States, dispatcher.State(v)) {
				continue
			}
			if len(page.Deliveries) == limit {
				page.HasMore = true
				break
			}
			rec, err := loadDelivery(tx, string(k[len(prefix)+8:]))
			if err != nil {
				return err
			}
			page.Deliveries = append(page.Deliveries, rec.delivery())
			lastKey = bytes.Clone(k[len(prefix):])
		}
		return nil
	})
	if err != nil {
		return dispatcher.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", q.EndpointID, err)
	}
	if page.HasMore {
		page.Next = hex.EncodeToString(lastKey[:8]) + string(lastKey[8:])
	}
	return page, nil
}

func hasState(states []dispatcher.State, s dispatcher.State) bool {
	for _, v := range states {
		if v == s {
			return true
		}
	}
	return false
}

// decodeCursor reads "<16 hex digits of created_at><delivery id>".
func decodeCursor(cur string) ([]byte, error) {
	if len(cur) < 16+len("dlv_") || cur[16:20] != "dlv_" {
		return nil, dispatcher.ErrInvalidCursor
	}
	ts, err := hex.DecodeString(cur[:16])
	if err != nil {
		return nil, dispatcher.ErrInvalidCursor
	}
	return concat(ts, []byte(cur[16:])), nil
}
