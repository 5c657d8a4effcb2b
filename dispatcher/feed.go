package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/practicegw/practicegw/practice"
)

// The event feed is the event log in the order events were recorded, which
// a live stream follows (the API's GET /v1/events/stream, practicegw
// listen). Id order will not do for that: an id sorts by occurred_at, and
// an event is often recorded after others that occurred later (a vendor
// webhook arriving late, a Kafka backlog, a slow outbox), so a reader
// following ids would pass over it. A feed position is assigned when the
// event is recorded, by the store every instance shares, so an event
// recorded by any gateway or dispatcher lands after every position already
// read, and a reader that reconnects to another instance resumes exactly
// where it was.

// EventFeed reads the event log in record order.
type EventFeed interface {
	// Feed returns up to q.Max of the tenant's events recorded after
	// q.After, in the order they were recorded, each with its position.
	// With q.After empty it returns no events and the current position, so
	// that following from there yields only events recorded later. An
	// After this store did not issue is ErrInvalidCursor.
	//
	// Positions are the tenant's own: one tenant's events neither move
	// another's positions nor push them out. A store keeps the positions
	// of each tenant's most recent events only (FeedLength); a read from
	// an After it no longer holds, or past events pruned by retention,
	// says so (FeedPage.Missed) and goes on from the oldest it keeps.
	Feed(ctx context.Context, q FeedQuery) (FeedPage, error)
}

// FeedQuery selects the next stretch of a tenant's feed.
type FeedQuery struct {
	Tenant practice.Tenant
	// After is a position from an earlier FeedPage; "" asks for the
	// current position.
	After string
	// Max bounds the events returned; zero is DefaultLimit.
	Max int
}

// FeedPage is one stretch of a feed.
type FeedPage struct {
	Entries []FeedEntry
	// Position continues after this stretch. It may be past the last
	// entry: positions of events pruned by retention are passed over.
	Position string
	// Missed says that events recorded after the query's After are gone
	// from the feed (trimmed past FeedLength, or pruned by retention)
	// before Entries: the reader cannot have them all, and should be told.
	Missed bool
	// Resume, when Missed, is the position the page goes on from: just
	// before its first entry (or Position when it has none). Reading
	// after it misses nothing more, unless the feed is trimmed again.
	Resume string
}

// FeedEntry is an event at its position in the feed.
type FeedEntry struct {
	Position string
	Event    Event
}

// FeedLength is how many recent positions a store keeps of each tenant,
// on every store. A reader resuming from an older position continues from
// the oldest kept, told that it missed some (FeedPage.Missed).
const FeedLength = 10000

// Follow reads the tenant's events recorded after a feed position (see
// EventFeed). Recorded says when this engine records more.
func (e *Engine) Follow(ctx context.Context, q FeedQuery) (FeedPage, error) {
	if e.b.Feed == nil {
		return FeedPage{}, errors.New("follow events: the store keeps no event feed")
	}
	if q.Max <= 0 {
		q.Max = DefaultLimit
	}
	page, err := e.b.Feed.Feed(ctx, q)
	if err != nil {
		return FeedPage{}, fmt.Errorf("follow events of %s: %w", q.Tenant, err)
	}
	return page, nil
}

// Recorded returns a channel that is closed when this engine next records
// a new event. Events recorded by other processes sharing the store raise
// no signal here; a follower polls for those.
func (e *Engine) Recorded() <-chan struct{} { return e.recorded.wait() }

// signal is a broadcast: every waiter's channel closes on the next fire.
// The zero value is ready to use.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
