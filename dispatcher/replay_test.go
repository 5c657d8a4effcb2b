package dispatcher_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
)

// heldBack is the replay error's bound, or fails the test.
func heldBack(t *testing.T, err error) *practice.HeldBackError {
	t.Helper()
	var held *practice.HeldBackError
	if !errors.As(err, &held) || held.RetryAfter < time.Second || held.Reason == "" {
		t.Fatalf("err = %v, want a *practice.HeldBackError with a reason and Retry-After", err)
	}
	return held
}

// TestReplaysCountAgainstTheFirmsInFlightBound is issue 24's finding 5:
// a flood of replays aimed at one host gets no more requests in flight
// than the firm's bound allows; the rest are held back with Retry-After,
// and another firm's replay is not held back by it.
func TestReplaysCountAgainstTheFirmsInFlightBound(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{MaxInFlightPerFirm: 2, MaxInFlightPerEndpoint: 2})
		release := make(chan struct{})
		// The first ten deliveries are answered at once; replays hang
		// until the test lets them go.
		rc := newReceiver(t, func(n int, _ http.ResponseWriter, r *http.Request) {
			if n <= 10 {
				return
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		for range 10 {
			h.ingest(clientChange(live))
		}
		eventually.True(t, waitWithin, waitTick, "ten deliveries", func() bool { return rc.count() == 10 })
		var ids []string
		for _, d := range h.deliveries(ep.ID) {
			ids = append(ids, h.waitAttempts(d.ID, 1).ID)
		}
		birch := practice.Tenant{Firm: "frm_birch"}
		quick := newReceiver(t, nil)
		other, _ := h.endpoint(birch, quick.URL())
		h.ingest(clientChange(birch))
		otherDelivery := h.waitAttempts(h.only(other.ID).ID, 1)

		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := h.eng.Replay(h.ctx, live, id)
				errs <- err
			}()
		}
		eventually.True(t, waitWithin, waitTick, "eight replays held back", func() bool { return len(errs) == 8 })
		for range 8 {
			heldBack(t, <-errs)
		}
		eventually.True(t, waitWithin, waitTick, "the two replays given a slot to reach the host", func() bool { return rc.active.Load() == 2 })
		if d, err := h.eng.Replay(h.ctx, birch, otherDelivery.ID); err != nil || d.State != dispatcher.StateDelivered {
			t.Fatalf("another firm's replay while this firm is at its bound: %v", err)
		}
		close(release)
		wg.Wait()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("a replay given a slot: %v", err)
			}
		}
		if got := rc.peak.Load(); got > 2 {
			t.Fatalf("%d of the firm's requests in flight at once, bound 2", got)
		}
		if d, err := h.eng.Replay(h.ctx, live, ids[0]); err != nil || d.State != dispatcher.StateDelivered {
			t.Fatalf("a replay once the slots are free: %v", err)
		}
		h.settled(ids...)
	})
}

// An endpoint's concurrency bounds replays too, below the firm's.
func TestReplaysCountAgainstTheEndpointsConcurrency(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{MaxInFlightPerFirm: 10, MaxInFlightPerEndpoint: 1})
		release := make(chan struct{})
		rc := newReceiver(t, func(n int, _ http.ResponseWriter, r *http.Request) {
			if n <= 2 {
				return
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		h.ingest(clientChange(live))
		eventually.True(t, waitWithin, waitTick, "two deliveries", func() bool { return rc.count() == 2 })
		ds := h.deliveries(ep.ID)
		first, second := h.waitAttempts(ds[0].ID, 1), h.waitAttempts(ds[1].ID, 1)

		done := make(chan error, 1)
		go func() { _, err := h.eng.Replay(h.ctx, live, first.ID); done <- err }()
		eventually.True(t, waitWithin, waitTick, "the first replay in flight", func() bool { return rc.active.Load() == 1 })
		_, err := h.eng.Replay(h.ctx, live, second.ID)
		heldBack(t, err)
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		h.settled(first.ID, second.ID)
	})
}

// TestAnOpenBreakerHoldsReplaysBack: a replay to an endpoint that failed
// into an open breaker is not sent; it is held back until the cooldown.
func TestAnOpenBreakerHoldsReplaysBack(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{BreakerFailures: 2, BreakerCooldown: time.Minute})
		rc := newReceiver(t, status(http.StatusServiceUnavailable))
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.waitAttempts(h.only(ep.ID).ID, 1)
		// The replay's failure is the breaker's second: it opens.
		if got, err := h.eng.Replay(h.ctx, live, d.ID); err != nil || got.State != dispatcher.StateFailed {
			t.Fatalf("first replay: %v", err)
		}
		for range 5 {
			_, err := h.eng.Replay(h.ctx, live, d.ID)
			if held := heldBack(t, err); held.RetryAfter > time.Minute {
				t.Fatalf("Retry-After %s beyond the cooldown", held.RetryAfter)
			}
		}
		if n := rc.count(); n != 2 {
			t.Fatalf("%d requests to a host whose breaker is open, want the 2 before it opened", n)
		}
		h.settled(d.ID)
	})
}

// TestBulkReplayIsBoundedPerFirmPerMinute: past BulkReplaysPerMinute a
// firm's bulk replays are refused as rate limited until the window moves
// on; another firm's are not.
func TestBulkReplayIsBoundedPerFirmPerMinute(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{BulkReplaysPerMinute: 2})
		rc := newReceiver(t, nil)
		ep, _ := h.endpoint(live, rc.URL())
		birch := practice.Tenant{Firm: "frm_birch"}
		other, _ := h.endpoint(birch, rc.URL())
		since := h.clock.Now().Add(-time.Hour)
		for range 2 {
			if _, err := h.eng.ReplayFailed(h.ctx, live, ep.ID, since); err != nil {
				t.Fatal(err)
			}
		}
		_, err := h.eng.ReplayFailed(h.ctx, live, ep.ID, since)
		if held := heldBack(t, err); !held.RateLimited || held.RetryAfter > time.Minute {
			t.Fatalf("third bulk replay in a minute: %+v", held)
		}
		if _, err := h.eng.ReplayFailed(h.ctx, birch, other.ID, since); err != nil {
			t.Fatalf("another firm's bulk replay: %v", err)
		}
		h.clock.Advance(30 * time.Second)
		if _, err := h.eng.ReplayFailed(h.ctx, live, ep.ID, since); err != nil {
			t.Fatalf("a bulk replay half a minute later: %v", err)
		}
	})
}
