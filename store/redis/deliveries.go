package redis

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// staticDelivery is the part of a delivery that never changes; state,
// times, lease and attempts are hash fields and a list of their own, so
// that scripts change them without decoding JSON.
type staticDelivery struct {
	ID         string    `json:"id"`
	EventID    string    `json:"event_id"`
	Event      string    `json:"event"`
	EndpointID string    `json:"endpoint_id"`
	Sandbox    bool      `json:"sandbox"`
	CreatedAt  time.Time `json:"created_at"`
}

// member is the delivery's key in its endpoint's indexes: creation time
// as 16 hex digits, then the id, so that lexical order is creation order.
// It doubles as the paging cursor, as store/bolt's does.
func member(d dispatcher.Delivery) string { return timeHex(d.CreatedAt) + d.ID }

func timeHex(t time.Time) string {
	var b [8]byte
	if !t.IsZero() && t.Unix() >= 0 {
		binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	}
	return hex.EncodeToString(b[:])
}

// fetched is a delivery as the fetch helper in lua/prelude.lua returns it.
type fetched struct {
	d      dispatcher.Delivery
	token  string
	until  time.Time
	replay bool
	queued bool
	snooze time.Time
}

// The order of FIELDS in lua/prelude.lua.
const (
	fStatic = iota
	fFirm
	fEndpoint
	fMember
	fState
	fNext
	fNextUs
	fUpdated
	fToken
	fUntil
	fReplay
	fQueued
	fieldCount
)

// decodeFetched reads one fetch result; ok is false if the delivery is
// gone.
func decodeFetched(v any) (f fetched, ok bool, err error) {
	parts, _ := v.([]any)
	if len(parts) != 3 {
		return f, false, nil
	}
	fields, _ := parts[0].([]any)
	if len(fields) != fieldCount {
		return f, false, fmt.Errorf("delivery has %d fields, want %d", len(fields), fieldCount)
	}
	str := func(i int) string {
		s, _ := fields[i].(string)
		return s
	}
	var st staticDelivery
	if err := json.Unmarshal([]byte(str(fStatic)), &st); err != nil {
		return f, false, fmt.Errorf("decode delivery: %w", err)
	}
	d := dispatcher.Delivery{
		ID: st.ID, EventID: st.EventID, Event: st.Event, EndpointID: st.EndpointID, Sandbox: st.Sandbox,
		CreatedAt: st.CreatedAt, Firm: str(fFirm), State: dispatcher.State(str(fState)),
		NextAttemptAt: fromNanos(str(fNext)), UpdatedAt: fromNanos(str(fUpdated)), Attempts: []dispatcher.Attempt{},
	}
	attempts, _ := parts[2].([]any)
	for _, a := range attempts {
		s, _ := a.(string)
		var at dispatcher.Attempt
		if err := json.Unmarshal([]byte(s), &at); err != nil {
			return f, false, fmt.Errorf("decode attempt of %s: %w", d.ID, err)
		}
		d.Attempts = append(d.Attempts, at)
	}
	snooze, _ := parts[1].(string)
	return fetched{
		d: d, token: str(fToken), until: fromMicros(str(fUntil)), replay: str(fReplay) == "1",
		queued: str(fQueued) != "", snooze: fromMicros(snooze),
	}, true, nil
}

// shown is the delivery as readers see it: while its endpoint is snoozed,
// a queued delivery's next attempt is no earlier than the snooze's end.
func (f fetched) shown() dispatcher.Delivery {
	d := f.d
	if f.queued && f.snooze.After(d.NextAttemptAt) {
		d.NextAttemptAt = f.snooze
	}
	return d
}

// Enqueue stores new deliveries in one script. Deliveries that exist,
// whose endpoint does not, or whose event is beyond the retention horizon,
// are skipped.
func (s *Store) Enqueue(ctx context.Context, ds []dispatcher.Delivery) (int, error) {
	if len(ds) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 10*len(ds))
	for _, d := range ds {
		static, err := encode(staticDelivery{ID: d.ID, EventID: d.EventID, Event: d.Event, EndpointID: d.EndpointID,
			Sandbox: d.Sandbox, CreatedAt: d.CreatedAt})
		if err != nil {
			return 0, fmt.Errorf("enqueue %s: %w", d.ID, err)
		}
		args = append(args, d.ID, d.EndpointID, member(d), static, d.Firm, string(d.State),
			nanos(d.NextAttemptAt), micros(d.NextAttemptAt), nanos(d.UpdatedAt), d.EventID)
	}
	res, err := s.run(ctx, s.scripts.enqueue, args...)
	if err != nil {
		return 0, fmt.Errorf("enqueue %d deliveries: %w", len(ds), err)
	}
	n, _ := res.(int64)
	return int(n), nil
}

// Lease leases one delivery for a replay, whatever its state.
func (s *Store) Lease(ctx context.Context, id string, now, until time.Time) (dispatcher.Claim, error) {
	token := newToken()
	f, err := s.one(ctx, s.scripts.lease, id, micros(now), micros(until), token)
	if err != nil {
		return dispatcher.Claim{}, fmt.Errorf("lease delivery %s: %w", id, err)
	}
	return dispatcher.Claim{
		Delivery: f.d,
		Lease:    dispatcher.Lease{DeliveryID: id, Token: token, Until: f.until},
		Replay:   f.replay,
	}, nil
}

// RecordAttempt appends an attempt and applies the new state in one
// script: the log never shows an attempt without its consequence or the
// reverse.
func (s *Store) RecordAttempt(ctx context.Context, l dispatcher.Lease, o dispatcher.Outcome) (dispatcher.Delivery, error) {
	attempt := ""
	if o.Attempt != nil {
		b, err := encode(o.Attempt)
		if err != nil {
			return dispatcher.Delivery{}, fmt.Errorf("record attempt on %s: %w", l.DeliveryID, err)
		}
		attempt = string(b)
	}
	next, nextUs := "", ""
	if o.State.Active() {
		next, nextUs = nanos(o.NextAttemptAt), micros(o.NextAttemptAt)
	}
	f, err := s.one(ctx, s.scripts.recordAttempt, l.DeliveryID, l.Token, attempt, string(o.State), nanos(o.At), next, nextUs)
	if err != nil {
		return dispatcher.Delivery{}, fmt.Errorf("record attempt on %s: %w", l.DeliveryID, err)
	}
	return f.d, nil
}

// one runs a script that answers {status, fetch(id)} and decodes the
// delivery.
func (s *Store) one(ctx context.Context, sc *goredis.Script, args ...any) (fetched, error) {
	res, err := s.run(ctx, sc, args...)
	if err != nil {
		return fetched{}, err
	}
	rest, err := status(res)
	if err != nil {
		return fetched{}, err
	}
	if len(rest) != 1 {
		return fetched{}, fmt.Errorf("unexpected script answer %v", res)
	}
	f, ok, err := decodeFetched(rest[0])
	if err != nil {
		return fetched{}, err
	}
	if !ok {
		return fetched{}, dispatcher.ErrNotFound
	}
	return f, nil
}

// requeueChunk bounds the failed deliveries one script looks at.
const requeueChunk = 500

// RequeueFailed queues one replay for each of an endpoint's failed
// deliveries created at or after since, reading only that endpoint's
// failed index from since on, a chunk per script.
func (s *Store) RequeueFailed(ctx context.Context, endpointID string, since, now time.Time) (int, error) {
	lo := "[" + timeHex(since)
	total := 0
	for {
		res, err := s.run(ctx, s.scripts.requeueFailed, endpointID, lo, nanos(now), micros(now), requeueChunk)
		if err != nil {
			return total, fmt.Errorf("requeue failed deliveries of %s: %w", endpointID, err)
		}
		arr, _ := res.([]any)
		if len(arr) != 2 {
			return total, fmt.Errorf("requeue failed deliveries of %s: unexpected answer %v", endpointID, res)
		}
		n, _ := arr[0].(int64)
		total += int(n)
		last, _ := arr[1].(string)
		if last == "" {
			return total, nil
		}
		lo = "(" + last
	}
}

// fetch reads deliveries by id, in one script so each is consistent.
func (s *Store) fetch(ctx context.Context, ids []string) ([]fetched, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	res, err := s.run(ctx, s.scripts.fetch, args...)
	if err != nil {
		return nil, err
	}
	arr, _ := res.([]any)
	out := make([]fetched, 0, len(arr))
	for _, v := range arr {
		f, ok, err := decodeFetched(v)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// Delivery returns the delivery with id.
func (s *Store) Delivery(ctx context.Context, id string) (dispatcher.Delivery, error) {
	fs, err := s.fetch(ctx, []string{id})
	if err != nil {
		return dispatcher.Delivery{}, fmt.Errorf("delivery %s: %w", id, err)
	}
	if len(fs) == 0 {
		return dispatcher.Delivery{}, fmt.Errorf("delivery %s: %w", id, dispatcher.ErrNotFound)
	}
	return fs[0].shown(), nil
}

// Deliveries pages through an endpoint's index in creation order. A states
// filter reads the per-state indexes and merges them, so it reads only the
// deliveries it keeps.
func (s *Store) Deliveries(ctx context.Context, q dispatcher.DeliveryQuery) (dispatcher.DeliveryPage, error) {
	lo := "[" + timeHex(q.From)
	if q.Cursor != "" {
		if err := checkCursor(q.Cursor); err != nil {
			return dispatcher.DeliveryPage{}, err
		}
		if q.Cursor >= timeHex(q.From) {
			lo = "(" + q.Cursor
		}
	}
	hi := "+"
	if !q.To.IsZero() {
		hi = "(" + timeHex(q.To)
	}
	limit := pageSize(q.Limit)
	indexes := []string{s.key("dlvs:", q.EndpointID)}
	if len(q.States) > 0 {
		indexes = indexes[:0]
		for _, st := range q.States {
			indexes = append(indexes, s.key("dlvs:", q.EndpointID, ":", string(st)))
		}
	}
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	cmds, err := s.rdb.Pipelined(cctx, func(p goredis.Pipeliner) error {
		for _, idx := range indexes {
			p.ZRangeByLex(cctx, idx, &goredis.ZRangeBy{Min: lo, Max: hi, Count: int64(limit + 1)})
		}
		return nil
	})
	if err != nil {
		return dispatcher.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", q.EndpointID, err)
	}
	var members []string
	for _, c := range cmds {
		members = append(members, c.(*goredis.StringSliceCmd).Val()...)
	}
	slices.Sort(members)
	members = slices.Compact(members)
	var page dispatcher.DeliveryPage
	if len(members) > limit {
		members, page.HasMore = members[:limit], true
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m[16:]
	}
	fs, err := s.fetch(ctx, ids)
	if err != nil {
		return dispatcher.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", q.EndpointID, err)
	}
	for _, f := range fs {
		page.Deliveries = append(page.Deliveries, f.shown())
	}
	if page.HasMore {
		page.Next = members[len(members)-1]
	}
	return page, nil
}

// checkCursor accepts "<16 hex digits of created_at><delivery id>".
func checkCursor(cur string) error {
	if len(cur) < 16+len("dlv_") || cur[16:20] != "dlv_" {
		return practice.ErrInvalidCursor
	}
	if _, err := hex.DecodeString(cur[:16]); err != nil {
		return practice.ErrInvalidCursor
	}
	return nil
}
