package bolt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// deliveryRecord stores what the delivery's API form leaves out: the
// tenant, where it sits in its endpoint's queue, and its lease.
type deliveryRecord struct {
	Delivery dispatcher.Delivery `json:"delivery"`
	Firm     string              `json:"firm"`
	// Queued is its key time in dispatch_queue; zero when it is not there.
	Queued     time.Time `json:"queued,omitzero"`
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

func (r deliveryRecord) claim() dispatcher.Claim {
	return dispatcher.Claim{
		Delivery: r.delivery(),
		Lease:    dispatcher.Lease{DeliveryID: r.Delivery.ID, Token: r.LeaseToken, Until: r.LeaseUntil},
		Replay:   r.Replay,
	}
}

func (r deliveryRecord) leased(now time.Time) bool {
	return r.LeaseToken != "" && r.LeaseUntil.After(now)
}

// waiting says whether the delivery belongs in a queue when nobody holds
// it: its schedule has attempts left, or a replay is asked for.
func (r deliveryRecord) waiting() bool { return r.Delivery.State.Active() || r.Replay }

func loadDelivery(tx *bbolt.Tx, id string) (deliveryRecord, error) {
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

func saveDelivery(tx *bbolt.Tx, rec deliveryRecord) error {
	return putJSON(tx.Bucket([]byte(bucketDeliveries)), rec.Delivery.ID, rec)
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
// whose endpoint was deleted meanwhile, or whose event is beyond the
// retention horizon, are skipped.
func (s *Store) Enqueue(ctx context.Context, ds []dispatcher.Delivery) (int, error) {
	created := 0
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		var err error
		created, _, err = s.EnqueueTx(tx, ds, nil, time.Time{})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("enqueue deliveries: %w", err)
	}
	return created, nil
}

// EnqueueTx is Enqueue inside tx (dispatcher.TxIntake). A new delivery
// that take (if set) accepts is stored leased until leaseUntil instead of
// queued, and its claim returned: its engine starts it from memory.
func (s *Store) EnqueueTx(tx *bbolt.Tx, ds []dispatcher.Delivery, take func(dispatcher.Delivery) bool,
	leaseUntil time.Time) (int, []dispatcher.Claim, error) {
	created := 0
	var claims []dispatcher.Claim
	q := openQueues(tx)
	dels := tx.Bucket([]byte(bucketDeliveries))
	endpoints := tx.Bucket([]byte(bucketEndpoints))
	byTarget := tx.Bucket([]byte(bucketDeliveriesByTarget))
	h := horizon(tx)
	for _, d := range ds {
		if beyondHorizon(d.EventID, h) || dels.Get([]byte(d.ID)) != nil || endpoints.Get([]byte(d.EndpointID)) == nil {
			continue
		}
		rec := deliveryRecord{Delivery: d, Firm: d.Firm}
		leased := take != nil && take(d)
		var err error
		if leased {
			err = q.lease(&rec, leaseUntil)
		} else {
			err = q.push(&rec, d.NextAttemptAt)
		}
		if err != nil {
			return 0, nil, err
		}
		if err := byTarget.Put(targetKey(d), []byte(d.State)); err != nil {
			return 0, nil, err
		}
		if err := saveDelivery(tx, rec); err != nil {
			return 0, nil, err
		}
		if leased {
			claims = append(claims, rec.claim())
		}
		created++
	}
	return created, claims, q.finish()
}

// Lease leases one delivery for a replay, whatever its state.
func (s *Store) Lease(ctx context.Context, id string, now, until time.Time) (dispatcher.Claim, error) {
	var claim dispatcher.Claim
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		rec, err := loadDelivery(tx, id)
		if err != nil {
			return err
		}
		if rec.leased(now) {
			return practice.ErrBusy
		}
		q := openQueues(tx)
		if err := q.lease(&rec, until); err != nil {
			return err
		}
		if err := saveDelivery(tx, rec); err != nil {
			return err
		}
		claim = rec.claim()
		return q.finish()
	})
	if err != nil {
		return dispatcher.Claim{}, fmt.Errorf("lease delivery %s: %w", id, err)
	}
	return claim, nil
}

// RecordAttempt appends an attempt and applies the new state in one
// transaction: the log never shows an attempt without its consequence or
// the reverse.
func (s *Store) RecordAttempt(ctx context.Context, l dispatcher.Lease, o dispatcher.Outcome) (dispatcher.Delivery, error) {
	var out dispatcher.Delivery
	err := s.updateLazy(ctx, func(tx *bbolt.Tx) error {
		rec, err := loadDelivery(tx, l.DeliveryID)
		if err != nil {
			return err
		}
		if rec.LeaseToken != l.Token {
			return practice.ErrLeaseLost
		}
		q := openQueues(tx)
		if err := q.unlease(&rec); err != nil {
			return err
		}
		d := &rec.Delivery
		if o.Attempt != nil {
			d.Attempts = append(d.Attempts, *o.Attempt)
		}
		d.State, d.UpdatedAt, rec.Replay = o.State, o.At, false
		d.NextAttemptAt = time.Time{}
		if o.State.Active() {
			d.NextAttemptAt = o.NextAttemptAt
			if err := q.push(&rec, o.NextAttemptAt); err != nil {
				return err
			}
		} else if err := q.pull(&rec); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketDeliveriesByTarget)).Put(targetKey(*d), []byte(d.State)); err != nil {
			return err
		}
		if err := saveDelivery(tx, rec); err != nil {
			return err
		}
		out = rec.delivery()
		return q.finish()
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
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		prefix := targetPrefix(endpointID)
		var ids []string
		c := tx.Bucket([]byte(bucketDeliveriesByTarget)).Cursor()
		for k, v := c.Seek(concat(prefix, timeKey(since))); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if dispatcher.State(v) == dispatcher.StateFailed {
				ids = append(ids, string(k[len(prefix)+8:]))
			}
		}
		q := openQueues(tx)
		for _, id := range ids {
			rec, err := loadDelivery(tx, id)
			if err != nil {
				return err
			}
			if rec.Replay || rec.leased(now) {
				continue
			}
			if err := q.unlease(&rec); err != nil {
				return err
			}
			rec.Replay = true
			rec.Delivery.NextAttemptAt = now
			if err := q.push(&rec, now); err != nil {
				return err
			}
			if err := saveDelivery(tx, rec); err != nil {
				return err
			}
			n++
		}
		return q.finish()
	})
	if err != nil {
		return 0, fmt.Errorf("requeue failed deliveries of %s: %w", endpointID, err)
	}
	return n, nil
}

// shown is the delivery as readers see it: while its endpoint is snoozed,
// a waiting delivery's next attempt is no earlier than the snooze's end.
func shown(rec deliveryRecord, snooze time.Time) dispatcher.Delivery {
	d := rec.delivery()
	if !rec.Queued.IsZero() && snooze.After(d.NextAttemptAt) {
		d.NextAttemptAt = snooze
	}
	return d
}

// Delivery returns the delivery with id.
func (s *Store) Delivery(ctx context.Context, id string) (dispatcher.Delivery, error) {
	var d dispatcher.Delivery
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		rec, err := loadDelivery(tx, id)
		if err != nil {
			return err
		}
		d = shown(rec, snoozedUntil(tx, rec.Delivery.EndpointID))
		return nil
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
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		snooze := snoozedUntil(tx, q.EndpointID)
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
			page.Deliveries = append(page.Deliveries, shown(rec, snooze))
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
		return nil, practice.ErrInvalidCursor
	}
	ts, err := hex.DecodeString(cur[:16])
	if err != nil {
		return nil, practice.ErrInvalidCursor
	}
	return concat(ts, []byte(cur[16:])), nil
}
