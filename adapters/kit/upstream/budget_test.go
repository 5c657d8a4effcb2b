package upstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/store/storetest"
)

// In one process the two clients are the one LocalBudget every adapter
// shares; time passes on an injected clock.
func TestLocalBudgetConformance(t *testing.T) {
	storetest.Budget(t, func(t *testing.T) (upstream.Budget, upstream.Budget, func(time.Duration)) {
		clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
		b := upstream.NewLocalBudget(clock)
		return b, b, clock.Advance
	})
}

// A vendor's allowance, booked through a budget, holds every window of
// its period wherever it falls, for a caller that calls whenever it may
// (the budget alone would let a burst of the limit through and then the
// limit's rate: nearly twice the limit in the first window).
func TestAllowanceHoldsEveryWindow(t *testing.T) {
	for _, a := range []upstream.Allowance{{Limit: 120, Per: time.Minute}, {Limit: 60, Per: time.Minute}, {Limit: 5000, Per: 24 * time.Hour}, {Limit: 3, Per: time.Minute}} {
		clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
		start := clock.Now()
		b := upstream.NewLocalBudget(clock)
		limit, per := upstream.Booked(a)
		var admitted []time.Duration
		for clock.Now().Sub(start) < 3*a.Per {
			wait, err := b.Take(context.Background(), "acct", limit, per)
			if err != nil {
				t.Fatal(err)
			}
			if wait == 0 {
				admitted = append(admitted, clock.Now().Sub(start))
				continue
			}
			clock.Advance(wait)
		}
		for i, from := range admitted {
			n := 0
			for _, at := range admitted[i:] {
				if at < from+a.Per {
					n++
				}
			}
			if n > a.Limit {
				t.Fatalf("%d per %v: %d calls in the window from %v", a.Limit, a.Per, n, from)
			}
		}
		if len(admitted) < 2*a.Limit {
			t.Fatalf("%d per %v: %d calls in three periods", a.Limit, a.Per, len(admitted))
		}
	}
}
