package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
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
		if page.Missed {
			t.Fatalf("the feed of %s after %q says events were missed, though nothing was trimmed", tn, pos)
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
		if _, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant, After: bad}); !errors.Is(err, practice.ErrInvalidCursor) {
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

// testFeedPositionsPerTenant checks that a tenant's positions are its own:
// other tenants' events do not move them, so a position tells a firm
// nothing of another firm's traffic.
func testFeedPositionsPerTenant(t *testing.T, b dispatcher.Backends) {
	other := practice.Tenant{Firm: "frm_birch"}
	sandbox := practice.Tenant{Firm: tenant.Firm, Sandbox: true}
	current := func(tn practice.Tenant) string {
		t.Helper()
		page, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tn})
		if err != nil {
			t.Fatal(err)
		}
		return page.Position
	}
	start := current(tenant)
	mine := event("chg_mine", dispatcher.ClientCreated, t0, tenant)
	if _, err := b.Events.Record(ctx, []dispatcher.Event{mine}); err != nil {
		t.Fatal(err)
	}
	after := current(tenant)
	for i := range 20 {
		evs := []dispatcher.Event{
			event(fmt.Sprintf("chg_birch_%d", i), dispatcher.JobOpened, t0, other),
			event(fmt.Sprintf("chg_sandbox_%d", i), dispatcher.JobOpened, t0, sandbox),
		}
		if _, err := b.Events.Record(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	if now := current(tenant); now != after {
		t.Fatalf("%s's position moved from %q to %q while only other tenants recorded events", tenant, after, now)
	}
	if ids, _ := feedIDs(t, b.Feed, tenant, start, 3); fmt.Sprint(ids) != fmt.Sprint([]string{mine.ID}) {
		t.Fatalf("feed of %s = %v, want only %s", tenant, ids, mine.ID)
	}
	if ids, _ := feedIDs(t, b.Feed, tenant, after, 3); len(ids) != 0 {
		t.Fatalf("feed of %s after its own last event = %v, want nothing", tenant, ids)
	}
}

// testFeedTrimmedPastIsMissed records more of one tenant's events than the
// feed keeps: a reader from before them is told it missed some and goes on
// from the oldest kept, and another tenant's older positions stay whole.
func testFeedTrimmedPastIsMissed(t *testing.T, b dispatcher.Backends) {
	quiet := practice.Tenant{Firm: "frm_quiet"}
	qStart, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: quiet})
	if err != nil {
		t.Fatal(err)
	}
	kept := event("chg_quiet", dispatcher.ClientCreated, t0, quiet)
	if _, err := b.Events.Record(ctx, []dispatcher.Event{kept}); err != nil {
		t.Fatal(err)
	}
	start, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	// Recorded until the oldest is gone: a store may keep a little more
	// than FeedLength (Redis trims whole nodes), never less.
	const batch = 500
	recorded, missed := 0, false
	var last dispatcher.Event
	for !missed {
		if recorded > 3*dispatcher.FeedLength {
			t.Fatalf("%d events recorded and a reader from before them still misses nothing", recorded)
		}
		evs := make([]dispatcher.Event, batch)
		for i := range evs {
			evs[i] = event(fmt.Sprintf("chg_flood_%d", recorded+i), dispatcher.JobOpened, t0.Add(time.Duration(recorded+i)*time.Millisecond), tenant)
		}
		if _, err := b.Events.Record(ctx, evs); err != nil {
			t.Fatal(err)
		}
		recorded, last = recorded+batch, evs[batch-1]
		page, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant, After: start.Position, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if missed = page.Missed; missed && recorded <= dispatcher.FeedLength {
			t.Fatalf("after %d events, fewer than FeedLength, a reader from before them is told it missed some", recorded)
		}
		if !missed && (len(page.Entries) != 1 || page.Entries[0].Event.ID != event("chg_flood_0", dispatcher.JobOpened, t0, tenant).ID) {
			t.Fatalf("after %d events and nothing missed, the first read is %+v", recorded, page.Entries)
		}
	}
	// Read on from there: the rest arrives, the last recorded last, and
	// only the first read says events were missed.
	page, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant, After: start.Position, Max: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) == 0 || page.Entries[0].Event.ID == event("chg_flood_0", dispatcher.JobOpened, t0, tenant).ID {
		t.Fatalf("a read that missed events begins with %d entries, the first trimmed one among them", len(page.Entries))
	}
	// Resuming from where it says the page goes on misses nothing more
	// and begins with the same event.
	again, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tenant, After: page.Resume, Max: 1})
	if err != nil || again.Missed || len(again.Entries) != 1 || again.Entries[0].Event.ID != page.Entries[0].Event.ID {
		t.Fatalf("reading after Resume %q: %+v, %v; want %s first and nothing missed", page.Resume, again, err, page.Entries[0].Event.ID)
	}
	n := len(page.Entries)
	ids, _ := feedIDs(t, b.Feed, tenant, page.Position, 500)
	n += len(ids)
	if n < dispatcher.FeedLength || n >= recorded || ids[len(ids)-1] != last.ID {
		t.Fatalf("after the gap the reader got %d events of %d recorded (ending %s), want at least FeedLength ending %s",
			n, recorded, ids[len(ids)-1], last.ID)
	}
	// The quiet tenant's position from before the flood still holds all.
	if ids, _ := feedIDs(t, b.Feed, quiet, qStart.Position, 10); fmt.Sprint(ids) != fmt.Sprint([]string{kept.ID}) {
		t.Fatalf("the quiet tenant's feed after another's flood = %v, want %s", ids, kept.ID)
	}
}

// testFeedTenantsUnderConcurrentRecords follows three tenants' feeds while
// writers record into all of them at once: each follower sees exactly its
// own tenant's events, once each, and is never told it missed one.
func testFeedTenantsUnderConcurrentRecords(t *testing.T, b dispatcher.Backends) {
	tenants := []practice.Tenant{tenant, {Firm: tenant.Firm, Sandbox: true}, {Firm: "frm_birch"}}
	const writers, each = 4, 15
	starts := make([]string, len(tenants))
	for i, tn := range tenants {
		page, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tn})
		if err != nil {
			t.Fatal(err)
		}
		starts[i] = page.Position
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var batch []dispatcher.Event
				// Each batch mixes tenants in a different order.
				for j := range tenants {
					tn := tenants[(w+i+j)%len(tenants)]
					batch = append(batch, event(fmt.Sprintf("chg_%s_%d_%d", tn, w, i), dispatcher.ClientUpdated, t0.Add(time.Duration(i)*time.Second), tn))
				}
				if _, err := b.Events.Record(ctx, batch); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var followers sync.WaitGroup
	for i, tn := range tenants {
		followers.Add(1)
		go func() {
			defer followers.Done()
			seen := map[string]bool{}
			pos := starts[i]
			deadline := time.Now().Add(20 * time.Second)
			for len(seen) < writers*each && time.Now().Before(deadline) {
				page, err := b.Feed.Feed(ctx, dispatcher.FeedQuery{Tenant: tn, After: pos, Max: 5})
				if err != nil {
					t.Error(err)
					return
				}
				if page.Missed {
					t.Errorf("the follower of %s was told it missed events after %q", tn, pos)
					return
				}
				for _, e := range page.Entries {
					if e.Event.Tenant() != tn || seen[e.Event.ID] {
						t.Errorf("the follower of %s got %s of %s (seen before: %v)", tn, e.Event.ID, e.Event.Tenant(), seen[e.Event.ID])
						return
					}
					seen[e.Event.ID] = true
				}
				pos = page.Position
			}
			if len(seen) != writers*each {
				t.Errorf("the follower of %s saw %d of %d events", tn, len(seen), writers*each)
			}
		}()
	}
	wg.Wait()
	followers.Wait()
}
