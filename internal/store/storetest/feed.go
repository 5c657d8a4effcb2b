package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/practice"
)

// feedIDs reads the tenant's feed from after to its end, Max at a time.
func feedIDs(t *testing.T, f dispatcher.EventFeed, tn practice.Tenant, after string, max int) (ids []string, pos string) {
	t.Helper()
	pos = after
	for {
		page, err := f.Feed(ctx, dispatcher.FeedQuery{Tenant: tn, After: pos, Max: max})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Entries) > max {
			t.Fatalf("Feed returned %d entries for Max %d", len(page.Entries), max)
		}
		for _, e := range page.Entries {
			if e.Event.Tenant() != tn {
				t.Fatalf("feed of %s holds %s's event %s", tn, e.Event.Tenant(), e.Event.ID)
			}
			ids = append(ids, e.Event.ID)
		}
		if page.Position == pos {
			return ids, pos
		}
		pos = page.Position
	}
}

func testFeed(t *testing.T, b dispatcher.Backends) {
	sandbox := practice.Tenant{Firm: tenant.Firm, Sandbox: true}
	start, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant})
	if err != nil || len(start.Entries) != 0 || start.Position == "" {
		t.Fatalf("the position of an empty feed: %+v, %v", start, err)
	}
	// Record order, not id (occurred_at) order: the event that occurred
	// first but was recorded last comes last.
	late := event("chg_late", dispatcher.ClientCreated, t0, tenant)
	first := event("chg_first", dispatcher.ClientUpdated, t0.Add(time.Hour), tenant)
	other := event("chg_other", dispatcher.ClientCreated, t0.Add(time.Hour), sandbox)
	for _, batch := range [][]dispatcher.Event{{first}, {other}, {late}, {first, late}} {
		if _, err := b.Events.Record(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	ids, pos := feedIDs(t, b.Feed, tenant, start.Position, 10)
	if fmt.Sprint(ids) != fmt.Sprint([]string{first.ID, late.ID}) {
		t.Fatalf("feed after the start = %v, want %s then %s once each", ids, first.ID, late.ID)
	}
	if ids, _ := feedIDs(t, b.Feed, sandbox, start.Position, 10); fmt.Sprint(ids) != fmt.Sprint([]string{other.ID}) {
		t.Fatalf("sandbox feed = %v, want %s", ids, other.ID)
	}
	// The current position yields only what is recorded later.
	now, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := feedIDs(t, b.Feed, tenant, now.Position, 10); len(ids) != 0 {
		t.Fatalf("feed after the current position = %v, want nothing", ids)
	}
	var more []dispatcher.Event
	var want []string
	for i := range 5 {
		ev := event(fmt.Sprintf("chg_more_%d", i), dispatcher.JobOpened, t0.Add(-time.Duration(i)*time.Minute), tenant)
		more, want = append(more, ev), append(want, ev.ID)
	}
	if _, err := b.Events.Record(ctx, more); err != nil {
		t.Fatal(err)
	}
	// Two at a time, resuming from each page's position.
	if ids, _ := feedIDs(t, b.Feed, tenant, now.Position, 2); fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("feed two at a time = %v, want %v", ids, want)
	}
	if ids, _ := feedIDs(t, b.Feed, tenant, pos, 200); fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("feed resumed from an earlier position = %v, want %v", ids, want)
	}
	for _, bad := range []string{"x", "evt_1", "-1"} {
		if _, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant, After: bad}); !errors.Is(err, dispatcher.ErrInvalidCursor) {
			t.Errorf("Feed after %q: %v, want ErrInvalidCursor", bad, err)
		}
	}
}

// testFeedUnderConcurrentRecords follows the feed while several writers
// record: a follower that reads while others write misses nothing and
// sees nothing twice, as a position is given in commit order.
func testFeedUnderConcurrentRecords(t *testing.T, b dispatcher.Backends) {
	start, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 6, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ev := event(fmt.Sprintf("chg_%d_%d", w, i), dispatcher.ClientUpdated, t0.Add(time.Duration(i)*time.Second), tenant)
				if _, err := b.Events.Record(ctx, []dispatcher.Event{ev}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[string]bool{}
	pos := start.Position
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < writers*each && time.Now().Before(deadline) {
		page, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant, After: pos, Max: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			if seen[e.Event.ID] {
				t.Fatalf("%s seen twice", e.Event.ID)
			}
			seen[e.Event.ID] = true
		}
		pos = page.Position
	}
	wg.Wait()
	if ids, _ := feedIDs(t, b.Feed, tenant, pos, 200); len(seen) != writers*each || len(ids) != 0 {
		t.Fatalf("the follower saw %d of %d events, and %d after the writers finished", len(seen), writers*each, len(ids))
	}
}
