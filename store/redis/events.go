package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

type eventRecord struct {
	Event      json.RawMessage `json:"event"` // the envelope
	ResourceID string          `json:"resource_id"`
}

// encode stores the envelope byte for byte, in the records' encoding, so
// a payload comes back exactly as it went in.
func encode(v any) ([]byte, error) { return practice.Marshal(v) }

func decodeEvent(raw []byte) (dispatcher.Event, error) {
	var rec eventRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return dispatcher.Event{}, fmt.Errorf("decode event: %w", err)
	}
	var ev dispatcher.Event
	if err := json.Unmarshal(rec.Event, &ev); err != nil {
		return dispatcher.Event{}, fmt.Errorf("decode event: %w", err)
	}
	ev.ResourceID = rec.ResourceID
	return ev, nil
}

// Record stores each event whose id is not stored yet and is not beyond
// the retention horizon, in one script.
func (s *Store) Record(ctx context.Context, evs []dispatcher.Event) ([]bool, error) {
	if len(evs) == 0 {
		return []bool{}, nil
	}
	args := make([]any, 0, 4*len(evs))
	for _, ev := range evs {
		env, err := ev.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("record event %s: %w", ev.ID, err)
		}
		rec, err := encode(eventRecord{Event: env, ResourceID: ev.ResourceID})
		if err != nil {
			return nil, fmt.Errorf("record event %s: %w", ev.ID, err)
		}
		args = append(args, ev.ID, tenantKey(ev.Tenant()), ev.Event, rec)
	}
	res, err := s.run(ctx, s.scripts.recordEvents, args...)
	if err != nil {
		return nil, fmt.Errorf("record %d events: %w", len(evs), err)
	}
	flags, _ := res.([]any)
	created := make([]bool, len(evs))
	for i := range created {
		if i < len(flags) {
			n, _ := flags[i].(int64)
			created[i] = n == 1
		}
	}
	return created, nil
}

// Event returns the event with id.
func (s *Store) Event(ctx context.Context, id string) (dispatcher.Event, error) {
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	raw, err := s.rdb.Get(cctx, s.key("evt:", id)).Bytes()
	if isNil(err) {
		return dispatcher.Event{}, fmt.Errorf("event %s: %w", id, dispatcher.ErrNotFound)
	}
	if err != nil {
		return dispatcher.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	return decodeEvent(raw)
}

// eventScan bounds one read of a tenant's index while filtering by kind.
const eventScan = 500

// Events pages through a tenant's index in id order, which is occurred_at
// order. Members carry the kind, so a filter reads only the events it
// keeps.
func (s *Store) Events(ctx context.Context, q dispatcher.EventQuery) (dispatcher.EventPage, error) {
	lo := "[" + dispatcher.EventIDFloor(q.From)
	if q.Cursor != "" {
		if !strings.HasPrefix(q.Cursor, "evt_") || len(q.Cursor) != len("evt_")+26 {
			return dispatcher.EventPage{}, practice.ErrInvalidCursor
		}
		// "\x7f" sorts after the space that ends the cursor's own member.
		if after := "(" + q.Cursor + "\x7f"; q.Cursor >= dispatcher.EventIDFloor(q.From) {
			lo = after
		}
	}
	hi := "+"
	if !q.To.IsZero() {
		hi = "(" + dispatcher.EventIDFloor(q.To)
	}
	limit := pageSize(q.Limit)
	index := s.key("evts:", tenantKey(q.Tenant))

	var ids []string
	hasMore, next, scanned, bound := false, "", 0, q.ScanBound()
scan:
	for offset := int64(0); ; offset += eventScan {
		cctx, cancel := s.ctx(ctx)
		members, err := s.rdb.ZRangeByLex(cctx, index, &goredis.ZRangeBy{Min: lo, Max: hi, Offset: offset, Count: eventScan}).Result()
		cancel()
		if err != nil {
			return dispatcher.EventPage{}, fmt.Errorf("list events: %w", err)
		}
		for _, m := range members {
			id, kind, _ := strings.Cut(m, " ")
			if len(q.Kinds) > 0 && !slices.Contains(q.Kinds, kind) {
				if scanned++; scanned >= bound {
					// A bounded read: page on from here.
					hasMore, next = true, id
					break scan
				}
				continue
			}
			if len(ids) == limit {
				hasMore = true
				break scan
			}
			scanned++
			ids = append(ids, id)
		}
		if len(members) < eventScan {
			break
		}
	}
	page := dispatcher.EventPage{HasMore: hasMore, Next: next}
	if len(ids) == 0 {
		return page, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.key("evt:", id)
	}
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	raws, err := s.rdb.MGet(cctx, keys...).Result()
	if err != nil {
		return dispatcher.EventPage{}, fmt.Errorf("list events: %w", err)
	}
	for _, raw := range raws {
		str, ok := raw.(string)
		if !ok {
			continue // index ahead of a deleted event
		}
		ev, err := decodeEvent([]byte(str))
		if err != nil {
			return dispatcher.EventPage{}, err
		}
		page.Events = append(page.Events, ev)
	}
	if page.HasMore && next == "" && len(page.Events) > 0 {
		page.Next = page.Events[len(page.Events)-1].ID
	}
	return page, nil
}

// pageSize applies the default page size; the engine has already refused
// sizes out of range.
func pageSize(n int) int {
	if n <= 0 {
		return dispatcher.DefaultLimit
	}
	return min(n, dispatcher.MaxLimit)
}
