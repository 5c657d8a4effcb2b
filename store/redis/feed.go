package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// The event feed (dispatcher.EventFeed) is a stream per tenant, added to
// by the script that records events (lua/record_events.lua), so record
// order is the order the scripts run, whichever gateway or dispatcher runs
// them. A position is the stream entry's id, 0-<n>: n counts the tenant's
// own events from 1, so it says nothing of other firms' traffic, and runs
// without a gap, so that a reader whose next entry is not the one after
// its position knows that entries were trimmed in between. XADD trims
// each stream to about dispatcher.FeedLength entries.
//
// The previous version numbered positions by time, in streams under
// feed:<tenant>; those positions are refused as unknown.

// Feed returns the tenant's events recorded after q.After, in record
// order.
func (s *Store) Feed(ctx context.Context, q dispatcher.FeedQuery) (dispatcher.FeedPage, error) {
	key := s.key("eventfeed:", tenantKey(q.Tenant))
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	var after streamPos
	if q.After != "" {
		var ok bool
		if after, ok = parseStreamID(q.After); !ok || after.ms != 0 {
			return dispatcher.FeedPage{}, practice.ErrInvalidCursor
		}
	}
	// In one transaction, so that the last position given out and what
	// follows After are of the same moment. The last position is the
	// stream's, which outlives the entries retention deletes.
	var (
		info *goredis.XInfoStreamCmd
		read *goredis.XMessageSliceCmd
	)
	_, err := s.rdb.TxPipelined(cctx, func(p goredis.Pipeliner) error {
		info = p.XInfoStream(cctx, key)
		if q.After != "" {
			read = p.XRangeN(cctx, key, "("+q.After, "+", int64(pageSize(q.Max)))
		}
		return nil
	})
	if err != nil && !noSuchKey(info.Err()) {
		return dispatcher.FeedPage{}, fmt.Errorf("event feed: %w", err)
	}
	end := streamPos{}
	if info.Err() == nil {
		end, _ = parseStreamID(info.Val().LastGeneratedID)
	}
	if q.After == "" {
		return dispatcher.FeedPage{Position: end.String()}, nil
	}
	if end.less(after) {
		return dispatcher.FeedPage{}, practice.ErrInvalidCursor
	}
	page := dispatcher.FeedPage{Position: q.After}
	msgs := read.Val()
	if len(msgs) == 0 {
		if after.less(end) {
			// Everything after After is gone (pruned).
			page.Missed, page.Position, page.Resume = true, end.String(), end.String()
		}
		return page, nil
	}
	return s.feedEntries(cctx, page, after, msgs)
}

// feedEntries fills page, of the feed read after after, with the events
// of msgs, its stream's entries: from the first one, or from a gap (the
// page says so), to the last one or the next gap.
func (s *Store) feedEntries(ctx context.Context, page dispatcher.FeedPage, after streamPos, msgs []goredis.XMessage) (dispatcher.FeedPage, error) {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		id, _ := m.Values["id"].(string)
		keys[i] = s.key("evt:", id)
	}
	raws, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return dispatcher.FeedPage{}, fmt.Errorf("event feed: %w", err)
	}
	// A tenant's positions run without a gap, so one missing before an
	// entry was trimmed, or its event pruned. A page begins at such a gap,
	// saying so, or ends before one.
	prev := after
	for i, raw := range raws {
		str, ok := raw.(string)
		if !ok {
			continue // pruned by retention
		}
		at, _ := parseStreamID(msgs[i].ID)
		if at.seq != prev.seq+1 {
			if len(page.Entries) > 0 {
				break
			}
			page.Missed, page.Resume = true, streamPos{seq: at.seq - 1}.String()
		}
		ev, err := decodeEvent([]byte(str))
		if err != nil {
			return dispatcher.FeedPage{}, err
		}
		page.Entries = append(page.Entries, dispatcher.FeedEntry{Position: msgs[i].ID, Event: ev})
		prev = at
	}
	if len(page.Entries) > 0 {
		page.Position = prev.String()
	} else {
		// Every entry read was of a pruned event.
		page.Missed, page.Position = true, msgs[len(msgs)-1].ID
		page.Resume = page.Position
	}
	return page, nil
}

// streamPos is a stream entry id, "<ms>-<seq>".
type streamPos struct{ ms, seq uint64 }

func (a streamPos) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

func (a streamPos) less(b streamPos) bool {
	return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq
}

func parseStreamID(id string) (streamPos, bool) {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return streamPos{}, false
	}
	m, err1 := strconv.ParseUint(ms, 10, 64)
	n, err2 := strconv.ParseUint(seq, 10, 64)
	return streamPos{m, n}, err1 == nil && err2 == nil
}

// streamID reports whether id is a stream entry id, "<ms>-<seq>".
func streamID(id string) bool {
	_, ok := parseStreamID(id)
	return ok
}
