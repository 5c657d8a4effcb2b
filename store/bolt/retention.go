package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
)

// horizonKey in dispatch_meta holds the retention horizon as an event id
// floor: events below it are neither recorded again nor delivered again.
var horizonKey = []byte("horizon")

func horizon(tx *bbolt.Tx) string {
	return string(tx.Bucket([]byte(bucketMeta)).Get(horizonKey))
}

// beyondHorizon says whether an event id falls before the horizon h.
func beyondHorizon(eventID, h string) bool { return h != "" && eventID < h }

// Prune takes one step of removing what is older than r.Before, in one
// transaction that looks at no more than r.Max records. Deliveries are
// walked in id order, which is their event's time order, and events in
// id order, which is occurred_at order, so a step reads only old keys.
func (s *Store) Prune(ctx context.Context, r dispatcher.PruneRequest) (dispatcher.PruneResult, error) {
	var res dispatcher.PruneResult
	floor := dispatcher.EventIDFloor(r.Before)
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		res = dispatcher.PruneResult{}
		meta := tx.Bucket([]byte(bucketMeta))
		if floor > horizon(tx) {
			if err := meta.Put(horizonKey, []byte(floor)); err != nil {
				return err
			}
		}
		budget := max(r.Max, 1)
		cursor := r.Cursor
		if !strings.HasPrefix(cursor, "evt_") {
			n, next, err := pruneDeliveries(tx, r, "dlv_"+floor[len("evt_"):], &budget)
			if err != nil {
				return err
			}
			res.Deliveries = n
			if next != "" {
				res.Next = next
				return nil
			}
			cursor = ""
		}
		n, next, err := pruneEvents(tx, floor, cursor, &budget)
		res.Events, res.Next = n, next
		if err != nil || n == 0 {
			return err
		}
		return dropFeedHead(tx, max(r.Max, 1))
	})
	if err != nil {
		return dispatcher.PruneResult{}, fmt.Errorf("prune webhook log: %w", err)
	}
	return res, nil
}

// seekAfter positions c at the first key after cursor, or the first key of
// the bucket if cursor is "".
func seekAfter(c *bbolt.Cursor, cursor string) ([]byte, []byte) {
	if cursor == "" {
		return c.First()
	}
	k, v := c.Seek([]byte(cursor))
	if k != nil && string(k) == cursor {
		return c.Next()
	}
	return k, v
}

// pruneDeliveries removes finished deliveries created before r.Before
// among those with ids below end, from r.Cursor on, looking at no more
// than *budget. next is the last id looked at if the budget ran out first.
func pruneDeliveries(tx *bbolt.Tx, r dispatcher.PruneRequest, end string, budget *int) (int, string, error) {
	dels := tx.Bucket([]byte(bucketDeliveries))
	var gone []deliveryRecord
	next := ""
	c := dels.Cursor()
	for k, v := seekAfter(c, r.Cursor); k != nil && string(k) < end; k, v = c.Next() {
		if *budget == 0 {
			break
		}
		*budget--
		next = string(k)
		var rec deliveryRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return 0, "", fmt.Errorf("decode delivery %s: %w", k, err)
		}
		d := rec.Delivery
		// A delivery someone holds (a replay in progress, an attempt whose
		// lease has not been tidied yet) or has queued stays for next time.
		if d.State.Active() || rec.Replay || rec.LeaseToken != "" || !rec.Queued.IsZero() || !d.CreatedAt.Before(r.Before) {
			continue
		}
		gone = append(gone, rec)
	}
	if *budget > 0 {
		next = "" // the range ended first
	}
	byTarget := tx.Bucket([]byte(bucketDeliveriesByTarget))
	for _, rec := range gone {
		if err := byTarget.Delete(targetKey(rec.Delivery)); err != nil {
			return 0, "", err
		}
		if err := dels.Delete([]byte(rec.Delivery.ID)); err != nil {
			return 0, "", err
		}
	}
	return len(gone), next, nil
}

// pruneEvents removes events with ids below floor that no delivery refers
// to any more, from cursor on, looking at no more than *budget.
func pruneEvents(tx *bbolt.Tx, floor, cursor string, budget *int) (int, string, error) {
	events := tx.Bucket([]byte(bucketEvents))
	var gone []eventRecord
	var ids []string
	next := ""
	c := events.Cursor()
	for k, v := seekAfter(c, cursor); k != nil && string(k) < floor; k, v = c.Next() {
		if *budget == 0 {
			break
		}
		*budget--
		next = string(k)
		id := string(k)
		referred, err := hasDeliveries(tx, id)
		if err != nil {
			return 0, "", err
		}
		if referred {
			continue // a kept delivery may still be sent or replayed
		}
		var rec eventRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return 0, "", fmt.Errorf("decode event %s: %w", id, err)
		}
		gone, ids = append(gone, rec), append(ids, id)
	}
	if *budget > 0 {
		next = ""
	}
	byTenant := tx.Bucket([]byte(bucketEventsByTenant))
	for i, rec := range gone {
		ev, err := rec.decode()
		if err != nil {
			return 0, "", err
		}
		if err := byTenant.Delete(concat(tenantKey(ev.Tenant()), []byte(ids[i]))); err != nil {
			return 0, "", err
		}
		if err := events.Delete([]byte(ids[i])); err != nil {
			return 0, "", err
		}
	}
	return len(gone), next, nil
}

// hasDeliveries says whether any delivery of the event remains. A
// delivery's id starts with its event's time, so the deliveries of one
// millisecond's events sit together and this reads only those.
func hasDeliveries(tx *bbolt.Tx, eventID string) (bool, error) {
	if len(eventID) < len("evt_")+10 {
		return false, nil
	}
	prefix := []byte("dlv_" + eventID[len("evt_"):len("evt_")+10])
	c := tx.Bucket([]byte(bucketDeliveries)).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rec struct {
			Delivery struct {
				EventID string `json:"event_id"`
			} `json:"delivery"`
		}
		if err := json.Unmarshal(v, &rec); err != nil {
			return false, fmt.Errorf("decode delivery %s: %w", k, err)
		}
		if rec.Delivery.EventID == eventID {
			return true, nil
		}
	}
	return false, nil
}
