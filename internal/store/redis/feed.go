package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/practicegw/practicegw/dispatcher"
)

// The event feed (dispatcher.EventFeed) is a stream per tenant, added to
// by the script that records events (lua/record_events.lua), so a
// position is the stream entry's id: Redis assigns them in the order the
// scripts run, whichever gateway or dispatcher runs them. XADD trims each
// stream to about dispatcher.FeedLength entries.

// Feed returns the tenant's events recorded after q.After, in record
// order.
func (s *Store) Feed(ctx context.Context, q dispatcher.FeedQuery) (dispatcher.FeedPage, error) {
	key := s.key("feed:", tenantKey(q.Tenant))
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	if q.After == "" {
		last, err := s.rdb.XRevRangeN(cctx, key, "+", "-", 1).Result()
		if err != nil {
			return dispatcher.FeedPage{}, fmt.Errorf("event feed: %w", err)
		}
		if len(last) == 0 {
			return dispatcher.FeedPage{Position: "0-0"}, nil
		}
		return dispatcher.FeedPage{Position: last[0].ID}, nil
	}
	if !streamID(q.After) {
		return dispatcher.FeedPage{}, dispatcher.ErrInvalidCursor
	}
	msgs, err := s.rdb.XRangeN(cctx, key, "("+q.After, "+", int64(pageSize(q.Max))).Result()
	if err != nil {
		return dispatcher.FeedPage{}, fmt.Errorf("event feed: %w", err)
	}
	page := dispatcher.FeedPage{Position: q.After}
	if len(msgs) == 0 {
		return page, nil
	}
	page.Position = msgs[len(msgs)-1].ID
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		id, _ := m.Values["id"].(string)
		keys[i] = s.key("evt:", id)
	}
	raws, err := s.rdb.MGet(cctx, keys...).Result()
	if err != nil {
		return dispatcher.FeedPage{}, fmt.Errorf("event feed: %w", err)
	}
	for i, raw := range raws {
		str, ok := raw.(string)
		if !ok {
			continue // pruned
		}
		ev, err := decodeEvent([]byte(str))
		if err != nil {
			return dispatcher.FeedPage{}, err
		}
		page.Entries = append(page.Entries, dispatcher.FeedEntry{Position: msgs[i].ID, Event: ev})
	}
	return page, nil
}

// streamID reports whether id is a stream entry id, "<ms>-<seq>".
func streamID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}
