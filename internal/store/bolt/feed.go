package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
)

// The event feed (dispatcher.EventFeed) is one bucket for every tenant,
// keyed by the bucket's own sequence, which Record advances inside the
// transaction that records the event: position order is commit order.
// Record trims it to the last dispatcher.FeedLength positions, so it
// stays small however long the event log is kept.
//
//	dispatch_event_feed   8-byte sequence -> firm NUL mode NUL event id

const bucketEventFeed = "dispatch_event_feed"

// feedScan bounds the positions one Feed call looks at, other tenants'
// included, so that a follower of a quiet tenant costs a bounded read.
const feedScan = 2000

// appendFeed gives a newly recorded event the next position.
func appendFeed(tx *bbolt.Tx, ev dispatcher.Event) error {
	feed := tx.Bucket([]byte(bucketEventFeed))
	seq, err := feed.NextSequence()
	if err != nil {
		return err
	}
	if err := feed.Put(binary.BigEndian.AppendUint64(nil, seq), concat(tenantKey(ev.Tenant()), []byte(ev.ID))); err != nil {
		return err
	}
	if seq <= dispatcher.FeedLength {
		return nil
	}
	// Each new position retires at most a few old ones.
	c := feed.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= seq-dispatcher.FeedLength; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// dropFeedHead removes, up to max, the positions at the feed's head whose
// events were pruned: the oldest recorded, which retention takes first.
func dropFeedHead(tx *bbolt.Tx, max int) error {
	events := tx.Bucket([]byte(bucketEvents))
	c := tx.Bucket([]byte(bucketEventFeed)).Cursor()
	for k, v := c.First(); k != nil && max > 0; k, v = c.First() {
		// The value is the tenant key, two NUL-terminated parts, then the id.
		parts := bytes.SplitN(v, []byte{0}, 3)
		if len(parts) == 3 && events.Get(parts[2]) != nil {
			return nil
		}
		if err := c.Delete(); err != nil {
			return err
		}
		max--
	}
	return nil
}

// Feed returns the tenant's events recorded after q.After, in record
// order.
func (s *Store) Feed(ctx context.Context, q dispatcher.FeedQuery) (dispatcher.FeedPage, error) {
	var page dispatcher.FeedPage
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		feed := tx.Bucket([]byte(bucketEventFeed))
		if q.After == "" {
			page.Position = strconv.FormatUint(feed.Sequence(), 10)
			return nil
		}
		after, err := strconv.ParseUint(q.After, 10, 64)
		if err != nil || after > feed.Sequence() {
			return dispatcher.ErrInvalidCursor
		}
		prefix, events := tenantKey(q.Tenant), tx.Bucket([]byte(bucketEvents))
		last, c := after, feed.Cursor()
		k, v := c.Seek(binary.BigEndian.AppendUint64(nil, after+1))
		for n := 0; k != nil && n < feedScan && len(page.Entries) < pageSize(q.Max); n++ {
			last = binary.BigEndian.Uint64(k)
			if id, ok := bytes.CutPrefix(v, prefix); ok {
				var rec eventRecord
				found, err := getJSON(events, string(id), &rec)
				if err != nil {
					return err
				}
				if found { // else pruned
					ev, err := rec.decode()
					if err != nil {
						return err
					}
					page.Entries = append(page.Entries, dispatcher.FeedEntry{Position: strconv.FormatUint(last, 10), Event: ev})
				}
			}
			k, v = c.Next()
		}
		page.Position = strconv.FormatUint(last, 10)
		return nil
	})
	if err != nil {
		return dispatcher.FeedPage{}, fmt.Errorf("event feed: %w", err)
	}
	return page, nil
}
