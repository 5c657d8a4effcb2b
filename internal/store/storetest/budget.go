package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/upstream"
)

// OpenBudget returns two clients of one empty budget backend, as two
// gateway instances would hold, and a way to let time pass: an injected
// clock's advance for an in-process backend, or a real wait for one on
// another clock (Redis's).
type OpenBudget func(t *testing.T) (a, b upstream.Budget, pass func(time.Duration))

// Budget checks an upstream.Budget: never more than limit requests in any
// window of per (a burst of a tenth of the limit, then the rest spread
// evenly), the wait until the next reported, nothing booked by a refusal,
// and one allowance shared by every client of the backend.
func Budget(t *testing.T, open OpenBudget) {
	ctx := context.Background()
	take := func(t *testing.T, b upstream.Budget, key string, limit int, per time.Duration) time.Duration {
		t.Helper()
		wait, err := b.Take(ctx, key, limit, per)
		if err != nil {
			t.Fatal(err)
		}
		return wait
	}

	t.Run("burst of a tenth shared across clients", func(t *testing.T) {
		a, b, _ := open(t)
		// 40 a minute: a burst of 4, then one every 60s/37.
		for i := range 4 {
			c := a
			if i%2 == 1 {
				c = b
			}
			if wait := take(t, c, "karbon:acct", 40, time.Minute); wait != 0 {
				t.Fatalf("take %d of a burst of 4: wait %v", i, wait)
			}
		}
		interval := time.Minute / 37
		for _, c := range []upstream.Budget{a, b} {
			if wait := take(t, c, "karbon:acct", 40, time.Minute); wait < interval-time.Second || wait > interval+time.Millisecond {
				t.Fatalf("fifth take: wait %v, want about %v", wait, interval)
			}
		}
		if wait := take(t, b, "karbon:other", 40, time.Minute); wait != 0 {
			t.Fatalf("another account's first take waits %v: accounts share a budget", wait)
		}
	})

	t.Run("one per interval after the burst", func(t *testing.T) {
		a, b, pass := open(t)
		const limit, per = 2, 2 * time.Second
		take(t, a, "xero:acct", limit, per)
		wait := take(t, b, "xero:acct", limit, per)
		if wait <= 0 || wait > per/limit {
			t.Fatalf("after the burst: wait %v, want within (0, %v]", wait, per/limit)
		}
		// Refusals booked nothing: once the reported wait has passed, one
		// request fits, and only one.
		take(t, a, "xero:acct", limit, per)
		pass(wait)
		if w := take(t, b, "xero:acct", limit, per); w != 0 {
			t.Fatalf("after waiting %v: wait %v, want 0", wait, w)
		}
		if w := take(t, a, "xero:acct", limit, per); w <= 0 {
			t.Fatalf("second take in one interval: wait %v, want > 0", w)
		}
	})

	t.Run("no window of per holds more than limit", func(t *testing.T) {
		a, b, pass := open(t)
		// A caller that takes whenever it may, for three windows: the
		// admissions, counted in every window of per that starts at one
		// of them, never pass the limit.
		const limit, per = 20, time.Second
		// Time passes by at least the waits sat out (an injected clock),
		// and by the real time on a backend on a real clock (Redis's).
		var admitted []time.Duration
		var waited time.Duration
		start := time.Now()
		elapsed := func() time.Duration { return max(waited, time.Since(start)) }
		for i := 0; elapsed() < 3*per; i++ {
			c := a
			if i%2 == 1 {
				c = b
			}
			at := elapsed()
			wait := take(t, c, "xero:day", limit, per)
			if wait == 0 {
				admitted = append(admitted, at)
				continue
			}
			pass(wait)
			waited += wait
		}
		if len(admitted) < 2*limit {
			t.Fatalf("admitted %d in %v at %d per %v: the budget starves", len(admitted), elapsed(), limit, per)
		}
		// Times here are the test's view, a little off Redis's own; a
		// window a few milliseconds short of per absorbs that and still
		// catches a burst of the whole limit (which lets nearly twice the
		// limit through). internal/gcra checks the exact bound.
		const slack = 10 * time.Millisecond
		for i, start := range admitted {
			n := 0
			for _, at := range admitted[i:] {
				if at < start+per-slack {
					n++
				}
			}
			if n > limit {
				t.Fatalf("%d admitted in the window of %v from %v (limit %d): %v", n, per, start, limit, admitted)
			}
		}
	})
}
