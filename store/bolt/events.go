package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

type eventRecord struct {
	Event      json.RawMessage `json:"event"` // the envelope
	ResourceID string          `json:"resource_id"`
}

func (r eventRecord) decode() (dispatcher.Event, error) {
	var ev dispatcher.Event
	if err := json.Unmarshal(r.Event, &ev); err != nil {
		return ev, fmt.Errorf("decode event: %w", err)
	}
	ev.ResourceID = r.ResourceID
	return ev, nil
}

// Record stores each event whose id is not stored yet and is not beyond
// the retention horizon, in one transaction.
func (s *Store) Record(ctx context.Context, evs []dispatcher.Event) ([]bool, error) {
	// Encoded before the transaction: it is pure work, and a retried
	// transaction need not repeat it.
	envs, err := envelopes(evs)
	if err != nil {
		return nil, err
	}
	var created []bool
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		var err error
		created, err = recordTx(tx, evs, envs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record %d events: %w", len(evs), err)
	}
	return created, nil
}

// RecordTx is Record inside tx, the transaction of the write that raised
// the events (dispatcher.TxIntake), with each event's envelope encoded
// already.
func (s *Store) RecordTx(tx *bbolt.Tx, evs []dispatcher.Event, envelopes [][]byte) ([]bool, error) {
	return recordTx(tx, evs, envelopes)
}

func envelopes(evs []dispatcher.Event) ([][]byte, error) {
	envs := make([][]byte, len(evs))
	for i, ev := range evs {
		env, err := ev.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("record event %s: %w", ev.ID, err)
		}
		envs[i] = env
	}
	return envs, nil
}

func recordTx(tx *bbolt.Tx, evs []dispatcher.Event, envs [][]byte) ([]bool, error) {
	created := make([]bool, len(evs))
	events := tx.Bucket([]byte(bucketEvents))
	byTenant := tx.Bucket([]byte(bucketEventsByTenant))
	h := horizon(tx)
	for i, ev := range evs {
		if beyondHorizon(ev.ID, h) || events.Get([]byte(ev.ID)) != nil {
			continue
		}
		if err := putJSON(events, ev.ID, eventRecord{Event: envs[i], ResourceID: ev.ResourceID}); err != nil {
			return nil, err
		}
		if err := byTenant.Put(concat(tenantKey(ev.Tenant()), []byte(ev.ID)), []byte(ev.Event)); err != nil {
			return nil, err
		}
		if err := appendFeed(tx, ev); err != nil {
			return nil, err
		}
		created[i] = true
	}
	return created, nil
}

// Event returns the event with id.
func (s *Store) Event(ctx context.Context, id string) (dispatcher.Event, error) {
	var ev dispatcher.Event
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var rec eventRecord
		ok, err := getJSON(tx.Bucket([]byte(bucketEvents)), id, &rec)
		if err != nil {
			return err
		}
		if !ok {
			return dispatcher.ErrNotFound
		}
		ev, err = rec.decode()
		return err
	})
	if err != nil {
		return dispatcher.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	return ev, nil
}

// Events pages through a tenant's index in id order, which is occurred_at
// order; the occurred_at range becomes a key range, so a narrow window
// reads only its own keys.
func (s *Store) Events(ctx context.Context, q dispatcher.EventQuery) (dispatcher.EventPage, error) {
	prefix := tenantKey(q.Tenant)
	start := concat(prefix, []byte(dispatcher.EventIDFloor(q.From)))
	var after []byte
	if q.Cursor != "" {
		if !strings.HasPrefix(q.Cursor, "evt_") || len(q.Cursor) != len("evt_")+26 {
			return dispatcher.EventPage{}, practice.ErrInvalidCursor
		}
		after = concat(prefix, []byte(q.Cursor))
		if bytes.Compare(after, start) > 0 {
			start = after
		}
	}
	var end []byte
	if !q.To.IsZero() {
		end = concat(prefix, []byte(dispatcher.EventIDFloor(q.To)))
	}
	limit, scan := pageSize(q.Limit), q.ScanBound()

	var page dispatcher.EventPage
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		events := tx.Bucket([]byte(bucketEvents))
		c := tx.Bucket([]byte(bucketEventsByTenant)).Cursor()
		scanned := 0
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if end != nil && bytes.Compare(k, end) >= 0 {
				break
			}
			if after != nil && bytes.Compare(k, after) <= 0 {
				continue
			}
			if len(q.Kinds) > 0 && !slices.Contains(q.Kinds, string(v)) {
				if scanned++; scanned >= scan {
					// A bounded read: page on from here.
					page.HasMore, page.Next = true, string(k[len(prefix):])
					return nil
				}
				continue
			}
			scanned++
			id := string(k[len(prefix):])
			if len(page.Events) == limit {
				page.HasMore = true
				break
			}
			var rec eventRecord
			ok, err := getJSON(events, id, &rec)
			if err != nil {
				return err
			}
			if !ok {
				continue // index ahead of a deleted event
			}
			ev, err := rec.decode()
			if err != nil {
				return err
			}
			page.Events = append(page.Events, ev)
		}
		return nil
	})
	if err != nil {
		return dispatcher.EventPage{}, fmt.Errorf("list events: %w", err)
	}
	if page.HasMore && page.Next == "" {
		page.Next = page.Events[len(page.Events)-1].ID
	}
	return page, nil
}
