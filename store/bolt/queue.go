package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
)

// queues is one transaction's view of the delivery queues. Every change to
// a queue or a lease goes through it, so that heads and the backlog count
// follow: finish writes them once per transaction for the endpoints
// touched.
type queues struct {
	tx      *bbolt.Tx
	queue   *bbolt.Bucket
	heads   *bbolt.Bucket
	state   *bbolt.Bucket
	leases  *bbolt.Bucket
	meta    *bbolt.Bucket
	backlog int64
	touched map[string]bool
}

func openQueues(tx *bbolt.Tx) *queues {
	return &queues{
		tx:      tx,
		queue:   tx.Bucket([]byte(bucketQueue)),
		heads:   tx.Bucket([]byte(bucketQueueHeads)),
		state:   tx.Bucket([]byte(bucketQueueState)),
		leases:  tx.Bucket([]byte(bucketLeases)),
		meta:    tx.Bucket([]byte(bucketMeta)),
		touched: make(map[string]bool),
	}
}

func queuePrefix(endpointID string) []byte { return []byte(endpointID + "\x00") }

func queueKey(endpointID string, at time.Time, deliveryID string) []byte {
	return concat(queuePrefix(endpointID), timeKey(at), []byte(deliveryID))
}

// push queues the delivery at at (its next attempt), moving it if it was
// queued elsewhere. Times a key cannot hold (zero, before 1970) queue it
// as due at once.
func (q *queues) push(rec *deliveryRecord, at time.Time) error {
	if err := q.pull(rec); err != nil {
		return err
	}
	at = keyTime(timeKey(at))
	if err := q.queue.Put(queueKey(rec.Delivery.EndpointID, at, rec.Delivery.ID), nil); err != nil {
		return err
	}
	rec.Queued = at
	q.backlog++
	q.touched[rec.Delivery.EndpointID] = true
	return nil
}

// pull takes the delivery out of its endpoint's queue, if it is there.
func (q *queues) pull(rec *deliveryRecord) error {
	if rec.Queued.IsZero() {
		return nil
	}
	if err := q.queue.Delete(queueKey(rec.Delivery.EndpointID, rec.Queued, rec.Delivery.ID)); err != nil {
		return err
	}
	rec.Queued = time.Time{}
	q.backlog--
	q.touched[rec.Delivery.EndpointID] = true
	return nil
}

func leaseKey(until time.Time, deliveryID string) []byte {
	return concat(timeKey(until), []byte(deliveryID))
}

// lease gives the delivery to a new holder until until, taking it out of
// its queue and out from under any expired lease.
func (q *queues) lease(rec *deliveryRecord, until time.Time) error {
	if err := q.pull(rec); err != nil {
		return err
	}
	if err := q.unlease(rec); err != nil {
		return err
	}
	until = keyTime(timeKey(until))
	if err := q.leases.Put(leaseKey(until, rec.Delivery.ID), []byte(rec.Delivery.EndpointID)); err != nil {
		return err
	}
	rec.LeaseToken, rec.LeaseUntil = newToken(), until
	return nil
}

// unlease ends the delivery's lease, expired or not.
func (q *queues) unlease(rec *deliveryRecord) error {
	if rec.LeaseToken == "" {
		return nil
	}
	if err := q.leases.Delete(leaseKey(rec.LeaseUntil, rec.Delivery.ID)); err != nil {
		return err
	}
	rec.LeaseToken, rec.LeaseUntil = "", time.Time{}
	return nil
}

// queueState is what dispatch_queue_state holds for an endpoint: where its
// head is filed and until when it is snoozed.
type queueState struct {
	head   time.Time // zero: not in dispatch_queue_heads
	snooze time.Time
}

func (q *queues) loadState(endpointID string) queueState {
	return decodeState(q.state.Get([]byte(endpointID)))
}

func decodeState(v []byte) queueState {
	var st queueState
	if len(v) == 16 {
		if n := binary.BigEndian.Uint64(v[:8]); n != 0 {
			st.head = keyTime(v[:8])
		}
		if n := binary.BigEndian.Uint64(v[8:]); n != 0 {
			st.snooze = keyTime(v[8:])
		}
	}
	return st
}

func (q *queues) saveState(endpointID string, st queueState) error {
	if st.head.IsZero() && st.snooze.IsZero() {
		return q.state.Delete([]byte(endpointID))
	}
	var head, snooze []byte = make([]byte, 8), make([]byte, 8)
	if !st.head.IsZero() {
		head = timeKey(st.head)
	}
	if !st.snooze.IsZero() {
		snooze = timeKey(st.snooze)
	}
	return q.state.Put([]byte(endpointID), concat(head, snooze))
}

func headKey(at time.Time, endpointID string) []byte { return concat(timeKey(at), []byte(endpointID)) }

// refile files the endpoint's head again: its earliest queued delivery's
// time, or the end of its snooze if later; no head if nothing is queued.
func (q *queues) refile(endpointID string, st queueState) error {
	var head time.Time
	prefix := queuePrefix(endpointID)
	if k, _ := q.queue.Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
		head = keyTime(k[len(prefix):])
		if st.snooze.After(head) {
			head = st.snooze
		}
	}
	if head.Equal(st.head) {
		return q.saveState(endpointID, st)
	}
	if !st.head.IsZero() {
		if err := q.heads.Delete(headKey(st.head, endpointID)); err != nil {
			return err
		}
	}
	if !head.IsZero() {
		if err := q.heads.Put(headKey(head, endpointID), nil); err != nil {
			return err
		}
	}
	st.head = head
	return q.saveState(endpointID, st)
}

// finish refiles the heads of the endpoints touched and counts the backlog.
func (q *queues) finish() error {
	for id := range q.touched {
		if err := q.refile(id, q.loadState(id)); err != nil {
			return err
		}
	}
	clear(q.touched)
	if q.backlog != 0 {
		n := int64(0)
		if v := q.meta.Get([]byte("backlog")); len(v) == 8 {
			n = int64(binary.BigEndian.Uint64(v))
		}
		n += q.backlog
		q.backlog = 0
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(max(n, 0)))
		return q.meta.Put([]byte("backlog"), b[:])
	}
	return nil
}

// forget drops an endpoint's queue state; its deliveries are gone.
func (q *queues) forget(endpointID string) error {
	st := q.loadState(endpointID)
	if !st.head.IsZero() {
		if err := q.heads.Delete(headKey(st.head, endpointID)); err != nil {
			return err
		}
	}
	delete(q.touched, endpointID)
	return q.state.Delete([]byte(endpointID))
}

// Claim leases due deliveries, endpoint by endpoint in head order. A
// read-only look comes first, so that an idle dispatcher, or a busy one
// whose due work all waits for room, costs no write (and no fsync).
func (s *Store) Claim(ctx context.Context, r dispatcher.ClaimRequest) ([]dispatcher.Claim, time.Time, error) {
	var work bool
	var next time.Time
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		work, next = claimable(tx, r)
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	if !work {
		return nil, next, nil
	}

	var claims []dispatcher.Claim
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		claims, next = nil, time.Time{}
		q := openQueues(tx)
		if err := q.expireLeases(r.Now); err != nil {
			return err
		}
		var err error
		if claims, err = q.claim(r); err != nil {
			return err
		}
		if err := q.finish(); err != nil {
			return err
		}
		if len(claims) >= r.Max {
			next = r.Now
		} else {
			next = q.nextAfter(r.Now)
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	return claims, next, nil
}

// claimable says whether a claim at r.Now would take or expire anything,
// and if not, when it next might.
func claimable(tx *bbolt.Tx, r dispatcher.ClaimRequest) (bool, time.Time) {
	if k, _ := tx.Bucket([]byte(bucketLeases)).Cursor().First(); k != nil && !keyTime(k).After(r.Now) {
		return true, r.Now
	}
	c := tx.Bucket([]byte(bucketQueueHeads)).Cursor()
	for k, _ := c.First(); k != nil && !keyTime(k).After(r.Now); k, _ = c.Next() {
		if r.Max > 0 && r.RoomFor(string(k[8:])) > 0 {
			return true, r.Now
		}
	}
	q := &queues{heads: tx.Bucket([]byte(bucketQueueHeads)), leases: tx.Bucket([]byte(bucketLeases))}
	return false, q.nextAfter(r.Now)
}

// nextAfter is the earliest head or lease expiry after now, zero if none.
func (q *queues) nextAfter(now time.Time) time.Time {
	from := timeKey(now.Add(time.Nanosecond))
	var next time.Time
	for _, b := range []*bbolt.Bucket{q.heads, q.leases} {
		if k, _ := b.Cursor().Seek(from); k != nil {
			next = earliest(next, keyTime(k))
		}
	}
	return next
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// expireLeases queues again the deliveries whose lease ran out by now:
// their dispatcher died, or lost touch, holding them.
func (q *queues) expireLeases(now time.Time) error {
	var expired [][]byte
	c := q.leases.Cursor()
	for k, _ := c.First(); k != nil && !keyTime(k).After(now); k, _ = c.Next() {
		expired = append(expired, bytes.Clone(k))
	}
	for _, k := range expired {
		rec, err := loadDelivery(q.tx, string(k[8:]))
		if errors.Is(err, dispatcher.ErrNotFound) {
			if err := q.leases.Delete(k); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !rec.LeaseUntil.Equal(keyTime(k)) {
			// A stale entry; the record knows its lease.
			if err := q.leases.Delete(k); err != nil {
				return err
			}
			continue
		}
		if err := q.unlease(&rec); err != nil {
			return err
		}
		if rec.waiting() {
			if err := q.push(&rec, rec.Delivery.NextAttemptAt); err != nil {
				return err
			}
		}
		if err := saveDelivery(q.tx, rec); err != nil {
			return err
		}
	}
	// The claim that follows walks the heads: file them first.
	return q.finish()
}

// claim takes due deliveries under r, endpoint by endpoint.
func (q *queues) claim(r dispatcher.ClaimRequest) ([]dispatcher.Claim, error) {
	// Pick the endpoints first: the heads bucket changes as they are
	// served. Each endpoint picked has at least one due delivery, so Max
	// of them are enough.
	type pick struct {
		endpointID string
		room       int
	}
	var picks []pick
	c := q.heads.Cursor()
	for k, _ := c.First(); k != nil && !keyTime(k).After(r.Now) && len(picks) < r.Max; k, _ = c.Next() {
		id := string(k[8:])
		if room := r.RoomFor(id); room > 0 {
			picks = append(picks, pick{id, room})
		}
	}
	var claims []dispatcher.Claim
	firmLeft := map[string]int{} // room left per firm, once met
	for _, p := range picks {
		want := min(p.room, r.Max-len(claims))
		if want <= 0 {
			break
		}
		prefix := queuePrefix(p.endpointID)
		var ids []string
		qc := q.queue.Cursor()
		for k, _ := qc.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(ids) < want; k, _ = qc.Next() {
			if keyTime(k[len(prefix):]).After(r.Now) {
				break
			}
			ids = append(ids, string(k[len(prefix)+8:]))
		}
		for _, id := range ids {
			rec, err := loadDelivery(q.tx, id)
			if err != nil {
				return nil, fmt.Errorf("queued delivery %s: %w", id, err)
			}
			// An endpoint is one firm's, so its deliveries all count
			// against that firm's room.
			left, ok := firmLeft[rec.Firm]
			if !ok {
				left = r.RoomForFirm(rec.Firm)
			}
			if left <= 0 {
				break
			}
			firmLeft[rec.Firm] = left - 1
			if err := q.lease(&rec, r.LeaseUntil); err != nil {
				return nil, err
			}
			if err := saveDelivery(q.tx, rec); err != nil {
				return nil, err
			}
			claims = append(claims, rec.claim())
		}
	}
	return claims, nil
}

// Release gives leases back without an attempt.
func (s *Store) Release(ctx context.Context, leases []dispatcher.Lease, notBefore time.Time) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		q := openQueues(tx)
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
			if err := q.unlease(&rec); err != nil {
				return err
			}
			if rec.waiting() {
				if notBefore.After(rec.Delivery.NextAttemptAt) {
					rec.Delivery.NextAttemptAt = notBefore
				}
				if err := q.push(&rec, rec.Delivery.NextAttemptAt); err != nil {
					return err
				}
			}
			if err := saveDelivery(tx, rec); err != nil {
				return err
			}
		}
		return q.finish()
	})
	if err != nil {
		return fmt.Errorf("release deliveries: %w", err)
	}
	return nil
}

// Snooze holds the endpoint's queue back until until.
func (s *Store) Snooze(ctx context.Context, endpointID string, until time.Time) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte(bucketEndpoints)).Get([]byte(endpointID)) == nil {
			return nil // deleted meanwhile: nothing left to hold back
		}
		q := openQueues(tx)
		st := q.loadState(endpointID)
		st.snooze = time.Time{}
		if !until.IsZero() {
			st.snooze = keyTime(timeKey(until))
		}
		return q.refile(endpointID, st)
	})
	if err != nil {
		return fmt.Errorf("snooze endpoint %s: %w", endpointID, err)
	}
	return nil
}

// Backlog counts queued deliveries.
func (s *Store) Backlog(ctx context.Context) (int64, error) {
	var n int64
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if v := tx.Bucket([]byte(bucketMeta)).Get([]byte("backlog")); len(v) == 8 {
			n = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count backlog: %w", err)
	}
	return n, nil
}

// snoozedUntil is the end of the endpoint's snooze, zero if none.
func snoozedUntil(tx *bbolt.Tx, endpointID string) time.Time {
	return decodeState(tx.Bucket([]byte(bucketQueueState)).Get([]byte(endpointID))).snooze
}
