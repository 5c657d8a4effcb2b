package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// The event feed (dispatcher.EventFeed) is a bucket per tenant, keyed by
// that bucket's own sequence, which Record advances inside the transaction
// that records the event: position order is commit order, and a tenant's
// positions count its own events only, so they say nothing of other
// firms' traffic. Record trims each tenant's bucket to its last
// dispatcher.FeedLength positions, so one firm's traffic cannot push
// another's out. A tenant's positions are consecutive: a gap before the
// first kept one is what was trimmed.
//
//	dispatch_event_feeds / firm NUL mode NUL / 8-byte sequence -> event id
//
// The previous version numbered every tenant's events in one bucket
// (dispatch_event_feed); New drops it, and the positions it gave out are
// refused as unknown.

const (
	bucketEventFeeds  = "dispatch_event_feeds"
	bucketOldFeedName = "dispatch_event_feed"
)

// feedScan bounds the positions one Feed call looks at, those of pruned
// events included, so that one read stays small.
const feedScan = 2000

// appendFeed gives a newly recorded event the next position of its
// tenant.
func appendFeed(tx *bbolt.Tx, ev dispatcher.Event) error {
	feed, err := tx.Bucket([]byte(bucketEventFeeds)).CreateBucketIfNotExists(tenantKey(ev.Tenant()))
	if err != nil {
		return err
	}
	seq, err := feed.NextSequence()
	if err != nil {
		return err
	}
	if err := feed.Put(binary.BigEndian.AppendUint64(nil, seq), []byte(ev.ID)); err != nil {
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

// dropFeedHead removes, up to max, the positions at the tenants' feed
// heads whose events were pruned: the oldest recorded, which retention
// takes first.
func dropFeedHead(tx *bbolt.Tx, max int) error {
	events, feeds := tx.Bucket([]byte(bucketEvents)), tx.Bucket([]byte(bucketEventFeeds))
	// Named first, then trimmed: a bucket is not changed while it is
	// walked.
	var tenants [][]byte
	if err := feeds.ForEachBucket(func(name []byte) error {
		tenants = append(tenants, name)
		return nil
	}); err != nil {
		return err
	}
	for _, name := range tenants {
		c := feeds.Bucket(name).Cursor()
		for k, v := c.First(); k != nil && max > 0 && events.Get(v) == nil; k, v = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			max--
		}
	}
	return nil
}

// Feed returns the tenant's events recorded after q.After, in record
// order.
func (s *Store) Feed(ctx context.Context, q dispatcher.FeedQuery) (dispatcher.FeedPage, error) {
	var page dispatcher.FeedPage
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		feed := tx.Bucket([]byte(bucketEventFeeds)).Bucket(tenantKey(q.Tenant))
		var seq uint64
		if feed != nil {
			seq = feed.Sequence()
		}
		if q.After == "" {
			page.Position = strconv.FormatUint(seq, 10)
			return nil
		}
		after, err := strconv.ParseUint(q.After, 10, 64)
		if err != nil || after > seq {
			return practice.ErrInvalidCursor
		}
		page.Position = q.After
		if feed == nil {
			return nil // nothing recorded yet: After is the start
		}
		events := tx.Bucket([]byte(bucketEvents))
		c := feed.Cursor()
		// A tenant's positions are consecutive, so one missing before an
		// event was trimmed, or its event pruned. A page begins at such a
		// gap, saying so, or ends before one.
		prev, last := after, after
		k, v := c.Seek(binary.BigEndian.AppendUint64(nil, after+1))
		for n := 0; k != nil && n < feedScan && len(page.Entries) < pageSize(q.Max); k, v = c.Next() {
			n++
			at := binary.BigEndian.Uint64(k)
			var rec eventRecord
			found, err := getJSON(events, string(v), &rec)
			if err != nil {
				return err
			}
			if !found { // pruned by retention
				last = at
				continue
			}
			if at != prev+1 {
				if len(page.Entries) > 0 {
					break
				}
				page.Missed, page.Resume = true, strconv.FormatUint(at-1, 10)
			}
			ev, err := rec.decode()
			if err != nil {
				return err
			}
			page.Entries = append(page.Entries, dispatcher.FeedEntry{Position: strconv.FormatUint(at, 10), Event: ev})
			prev, last = at, at
		}
		switch {
		case len(page.Entries) > 0:
			page.Position = strconv.FormatUint(prev, 10)
		case k == nil && seq > after:
			// Everything after After is gone.
			page.Missed, page.Position, page.Resume = true, strconv.FormatUint(seq, 10), strconv.FormatUint(seq, 10)
		case last > after:
			// A scan of pruned positions only.
			page.Missed, page.Position, page.Resume = true, strconv.FormatUint(last, 10), strconv.FormatUint(last, 10)
		}
		return nil
	})
	if err != nil {
		return dispatcher.FeedPage{}, fmt.Errorf("event feed: %w", err)
	}
	return page, nil
}
