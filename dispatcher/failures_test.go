package dispatcher_test

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
)

func TestRotationOverlap(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, nil)
		ep, oldSecret := h.endpoint(live, rc.URL())
		_, newSecret, err := h.eng.RotateSecret(h.ctx, live, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if newSecret == oldSecret || !strings.HasPrefix(newSecret, "whsec_") {
			t.Fatalf("rotation gave %q", newSecret)
		}
		rotatedAt := h.clock.Now()

		check := func(when string, wantEntries int, oldVerifies bool) {
			t.Helper()
			n := rc.count()
			h.ingest(clientChange(live))
			eventually.True(t, waitWithin, waitTick, "a delivery "+when, func() bool { return rc.count() == n+1 })
			// Let the attempt be recorded before the clock moves on: jumping
			// past its lease would hand the delivery to another claim.
			eventually.True(t, waitWithin, waitTick, "the attempt recorded", func() bool {
				for _, d := range h.deliveries(ep.ID) {
					if d.State != dispatcher.StateDelivered {
						return false
					}
				}
				return true
			})
			r := rc.requests()[n]
			if got := len(strings.Fields(r.header.Get("webhook-signature"))); got != wantEntries {
				t.Errorf("%s: %d signatures, want %d", when, got, wantEntries)
			}
			if err := verifyStandardWebhook(newSecret, r.header, r.body, h.clock.Now()); err != nil {
				t.Errorf("%s: the new secret does not verify: %v", when, err)
			}
			err := verifyStandardWebhook(oldSecret, r.header, r.body, h.clock.Now())
			if (err == nil) != oldVerifies {
				t.Errorf("%s: the old secret verifies=%v, want %v", when, err == nil, oldVerifies)
			}
		}
		check("just after rotating", 2, true)
		h.clock.Set(rotatedAt.Add(24*time.Hour - time.Second))
		check("a second before the overlap ends", 2, true)
		h.clock.Set(rotatedAt.Add(24 * time.Hour))
		check("after the overlap", 1, false)
	})
}

func TestGoneDisablesTheEndpoint(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		var back atomic.Bool
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			if !back.Load() {
				w.WriteHeader(http.StatusGone)
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.waitAttempts(h.only(ep.ID).ID, 1)
		if d.State != dispatcher.StateFailed || d.Attempts[0].ResponseCode != 410 || !strings.Contains(d.Attempts[0].Error, "410 Gone") {
			t.Fatalf("after a 410: %s %+v", d.State, d.Attempts)
		}
		var got dispatcher.Endpoint
		eventually.True(t, waitWithin, waitTick, "the endpoint disabled", func() bool {
			got, _ = h.eng.GetEndpoint(h.ctx, live, ep.ID)
			return got.Status == dispatcher.EndpointDisabled
		})
		if !strings.Contains(got.DisabledReason, "410") {
			t.Errorf("reason %q", got.DisabledReason)
		}
		h.ingest(clientChange(live))
		if n := len(h.deliveries(ep.ID)); n != 1 {
			t.Errorf("%d deliveries after disabling, want 1", n)
		}
		if _, err := h.eng.Replay(h.ctx, live, d.ID); !errors.Is(err, practice.ErrEndpointDisabled) {
			t.Errorf("replay to a disabled endpoint: %v", err)
		}
		// Enabling it again lets a replay through.
		enabled := dispatcher.EndpointEnabled
		got, err := h.eng.UpdateEndpoint(h.ctx, live, ep.ID, dispatcher.EndpointUpdate{Status: &enabled})
		if err != nil || got.DisabledReason != "" {
			t.Fatalf("enable: %+v %v", got, err)
		}
		back.Store(true)
		if d, err := h.eng.Replay(h.ctx, live, d.ID); err != nil || d.State != dispatcher.StateDelivered {
			t.Fatalf("replay after enabling: %v %v", d.State, err)
		}
	})
}

// A delivery waiting for its next attempt when its endpoint is disabled
// fails at that attempt's time without sending anything and without an
// attempt recorded: nothing is sent to a disabled endpoint.
func TestDisabledEndpointFailsAWaitingDeliveryUnattempted(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, status(http.StatusInternalServerError))
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.waitAttempts(h.only(ep.ID).ID, 1)
		if d.State != dispatcher.StateRetrying {
			t.Fatalf("after a 500: %s", d.State)
		}
		disabled := dispatcher.EndpointDisabled
		if _, err := h.eng.UpdateEndpoint(h.ctx, live, ep.ID, dispatcher.EndpointUpdate{Status: &disabled}); err != nil {
			t.Fatal(err)
		}
		h.due(d)
		eventually.True(t, waitWithin, waitTick, "the delivery failed", func() bool { d = h.delivery(d.ID); return d.State == dispatcher.StateFailed })
		if len(d.Attempts) != 1 || rc.count() != 1 {
			t.Fatalf("%d attempts recorded, %d requests received; want the first alone", len(d.Attempts), rc.count())
		}
		h.settled(d.ID)
	})
}

func TestRetryAfterIsHonouredWithinBounds(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		tests := []struct {
			name       string
			code       int
			retryAfter func(now time.Time) string
			min, max   time.Duration
		}{
			{"429 seconds", 429, func(time.Time) string { return "600" }, 10 * time.Minute, 10 * time.Minute},
			{"503 date", 503, func(now time.Time) string { return now.Add(2 * time.Hour).Format(http.TimeFormat) }, 2 * time.Hour, 2 * time.Hour},
			{"429 clamped to 24h", 429, func(time.Time) string { return "604800" }, 24 * time.Hour, 24 * time.Hour},
			{"shorter than the backoff", 503, func(time.Time) string { return "1" }, 30 * time.Second, 36 * time.Second},
			{"ignored on a 500", 500, func(time.Time) string { return "600" }, 30 * time.Second, 36 * time.Second},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Retry-After", tt.retryAfter(h.clock.Now()))
					w.WriteHeader(tt.code)
				})
				ep, _ := h.endpoint(live, rc.URL())
				h.ingest(clientChange(live))
				d := h.waitAttempts(h.only(ep.ID).ID, 1)
				wait := d.NextAttemptAt.Sub(d.Attempts[0].StartedAt)
				if wait < tt.min || wait > tt.max {
					t.Fatalf("next attempt after %s, want in [%s, %s]", wait, tt.min, tt.max)
				}
			})
		}
	})
}

func TestRedirectIsAFailedAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		target := newReceiver(t, nil)
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL(), http.StatusTemporaryRedirect)
		})
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.waitAttempts(h.only(ep.ID).ID, 1)
		a := d.Attempts[0]
		if d.State != dispatcher.StateRetrying || a.ResponseCode != 307 || !strings.Contains(a.Error, "redirects are not followed") {
			t.Fatalf("after a redirect: %s %+v", d.State, a)
		}
		if target.count() != 0 {
			t.Fatal("the redirect was followed")
		}
	})
}

func TestTimeoutIsAFailedAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{Timeout: 150 * time.Millisecond})
		// The receiver never answers: the request ends when the engine gives
		// up on it, or when the receiver closes.
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.waitAttempts(h.only(ep.ID).ID, 1)
		a := d.Attempts[0]
		if d.State != dispatcher.StateRetrying || a.ResponseCode != 0 || a.Error != "no response within 150ms" {
			t.Fatalf("after a timeout: %s %+v", d.State, a)
		}
		if a.DurationMS < 140 || a.DurationMS > 2000 {
			t.Errorf("duration %dms", a.DurationMS)
		}
	})
}

// A dead endpoint holds only its own concurrency slots: deliveries to a
// healthy endpoint of the same firm go straight through.
func TestDeadEndpointDoesNotDelayHealthyOnes(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{Timeout: 3 * time.Second, MaxInFlightPerEndpoint: 2, Workers: 8})
		dead := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		})
		healthy := newReceiver(t, nil)
		h.endpoint(live, dead.URL())
		h.endpoint(live, healthy.URL())

		start := time.Now()
		const n = 20
		for range n {
			h.ingest(clientChange(live))
		}
		eventually.True(t, waitWithin, waitTick, "every healthy delivery", func() bool { return healthy.count() == n })
		if elapsed := time.Since(start); elapsed > 2*time.Second {
			t.Fatalf("healthy deliveries took %s, behind a dead endpoint timing out after 3s", elapsed)
		}
		if p := dead.peak.Load(); p > 2 {
			t.Errorf("%d concurrent requests to the dead endpoint, limit 2", p)
		}
		t.Logf("%d healthy deliveries in %s while the dead endpoint held %d slots", n, time.Since(start), dead.peak.Load())
	})
}

// While an endpoint's breaker is open its due deliveries wait for the
// breaker to half-open, and no attempt is spent on them.
func TestOpenBreakerDefersWithoutSpendingAttempts(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{BreakerFailures: 3, BreakerCooldown: time.Minute})
		rc := newReceiver(t, status(http.StatusServiceUnavailable))
		ep, _ := h.endpoint(live, rc.URL())
		for range 3 {
			h.ingest(clientChange(live))
		}
		eventually.True(t, waitWithin, waitTick, "three failed attempts", func() bool { return rc.count() == 3 })
		eventually.True(t, waitWithin, waitTick, "three recorded attempts", func() bool {
			for _, d := range h.deliveries(ep.ID) {
				if len(d.Attempts) != 1 {
					return false
				}
			}
			return true
		})

		// New deliveries meet an open breaker.
		for range 2 {
			h.ingest(clientChange(live))
		}
		now := h.clock.Now()
		eventually.True(t, waitWithin, waitTick, "new deliveries deferred", func() bool {
			deferred := 0
			for _, d := range h.deliveries(ep.ID) {
				if len(d.Attempts) == 0 && d.NextAttemptAt.After(now.Add(50*time.Second)) {
					deferred++
				}
			}
			return deferred == 2
		})
		// Retries that fall due meet it too.
		h.clock.Advance(40 * time.Second)
		h.eng.Kick()
		now = h.clock.Now()
		eventually.True(t, waitWithin, waitTick, "retries deferred", func() bool {
			for _, d := range h.deliveries(ep.ID) {
				if !d.NextAttemptAt.After(now) {
					return false
				}
			}
			return true
		})
		for _, d := range h.deliveries(ep.ID) {
			if d.ScheduledAttempts() > 1 || !d.State.Active() {
				t.Errorf("delivery %s: %s with %d attempts", d.ID, d.State, len(d.Attempts))
			}
			if d.NextAttemptAt.After(now.Add(time.Minute)) {
				t.Errorf("delivery %s deferred to %s, past the breaker's half-open time", d.ID, d.NextAttemptAt)
			}
		}
		if rc.count() != 3 {
			t.Fatalf("%d requests, want 3: deferred deliveries must not be attempted", rc.count())
		}
	})
}

// The address check at connect time holds even for an endpoint that was
// allowed when registered (DNS may have changed since).
func TestConnectTimeCheckRefusesWhatRegistrationAllowed(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, nil)
		ep, _ := h.endpoint(live, rc.URL())
		// A second dispatcher on the same store, without the allow-list, does
		// the delivering.
		h.eng.Close()
		strict, _ := h.engine(dispatcher.Config{AllowCIDRs: []netip.Prefix{}})
		h.run(strict)
		if err := strict.Ingest(h.ctx, clientChange(live)); err != nil {
			t.Fatal(err)
		}
		d := h.waitAttempts(h.only(ep.ID).ID, 1)
		a := d.Attempts[0]
		if d.State != dispatcher.StateFailed || a.ResponseCode != 0 || !strings.Contains(a.Error, "webhooks may not be sent to 127.0.0.1 (loopback)") {
			t.Fatalf("after a refused connect: %s %+v", d.State, a)
		}
		if rc.count() != 0 {
			t.Fatal("the request reached the receiver")
		}
	})
}
