package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// OpenBudget returns two clients of one empty budget backend, as two
// gateway instances would hold, and a way to let time pass: an injected
// clock's advance for an in-process backend, or a real wait for one on
// another clock (Redis's).
type OpenBudget func(t *testing.T) (a, b upstream.Budget, pass func(time.Duration))

// Budget checks an upstream.Budget: a burst of limit requests, then one per
// interval (per/limit), the wait until the next reported, nothing booked by
// a refusal, and one allowance shared by every client of the backend.
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

	t.Run("burst of limit shared across clients", func(t *testing.T) {
		a, b, _ := open(t)
		for i := range 4 {
			c := a
			if i%2 == 1 {
				c = b
			}
			if wait := take(t, c, "karbon:acct", 4, time.Minute); wait != 0 {
				t.Fatalf("take %d of a burst of 4: wait %v", i, wait)
			}
		}
		// The next fits one interval (15s) after the first booking.
		for _, c := range []upstream.Budget{a, b} {
			if wait := take(t, c, "karbon:acct", 4, time.Minute); wait < 14*time.Second || wait > 15*time.Second {
				t.Fatalf("fifth take: wait %v, want about 15s", wait)
			}
		}
		if wait := take(t, b, "karbon:other", 4, time.Minute); wait != 0 {
			t.Fatalf("another account's first take waits %v: accounts share a budget", wait)
		}
	})

	t.Run("one per interval after the burst", func(t *testing.T) {
		a, b, pass := open(t)
		const limit, per = 2, 2 * time.Second
		take(t, a, "xero:acct", limit, per)
		take(t, b, "xero:acct", limit, per)
		wait := take(t, a, "xero:acct", limit, per)
		if wait <= 0 || wait > per/limit {
			t.Fatalf("after the burst: wait %v, want within (0, %v]", wait, per/limit)
		}
		// Refusals booked nothing: once the reported wait has passed, one
		// request fits, and only one.
		take(t, b, "xero:acct", limit, per)
		pass(wait)
		if w := take(t, b, "xero:acct", limit, per); w != 0 {
			t.Fatalf("after waiting %v: wait %v, want 0", wait, w)
		}
		if w := take(t, a, "xero:acct", limit, per); w <= 0 {
			t.Fatalf("second take in one interval: wait %v, want > 0", w)
		}
	})
}
