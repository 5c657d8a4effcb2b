package gcra

import (
	"math/rand/v2"
	"testing"
)

// A cell of 3 per 30 units admits a burst of 3, then one every 10, and a
// refusal books nothing.
func TestStepBurstThenOnePerInterval(t *testing.T) {
	c := Cell{Interval: 10, Tolerance: 30}
	var tat int64
	for i := range 3 {
		var r Result
		tat, r = c.Step(tat, 0)
		if !r.Allowed || r.Remaining != int64(2-i) {
			t.Fatalf("request %d at 0: %+v, want allowed with %d remaining", i, r, 2-i)
		}
	}
	next, r := c.Step(tat, 0)
	if r.Allowed || r.RetryAfter != 10 || r.Reset != 30 || next != tat {
		t.Fatalf("4th at 0: next %d, %+v; want refused, retry after 10, reset 30, TAT kept %d", next, r, tat)
	}
	if _, r = c.Step(tat, 9); r.Allowed {
		t.Fatalf("at 9: %+v, want refused", r)
	}
	if tat, r = c.Step(tat, 10); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("at 10: %+v, want allowed with 0 remaining", r)
	}
	if tat != 40 {
		t.Fatalf("TAT after 4 bookings = %d, want 40", tat)
	}
}

// Peek reports what Step would decide without booking.
func TestPeekAgreesWithStep(t *testing.T) {
	c := Cell{Interval: 7, Tolerance: 21}
	var tat int64
	for now := int64(0); now < 100; now += 2 {
		p := c.Peek(tat, now)
		var s Result
		tat, s = c.Step(tat, now)
		if p.Allowed != s.Allowed {
			t.Fatalf("at %d: peek %+v, step %+v", now, p, s)
		}
		if !s.Allowed && p.RetryAfter != s.RetryAfter {
			t.Fatalf("at %d: peek retry %d, step retry %d", now, p.RetryAfter, s.RetryAfter)
		}
	}
}

// Within admits at most limit requests in any window of per, however the
// requests arrive, and does not starve a caller that keeps asking.
func TestWithinHoldsEveryWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, r := range []struct{ limit, per int64 }{
		{1, 1_000}, {3, 60_000_000}, {20, 1_000_000_000}, {60, 60_000_000_000},
		{120, 60_000_000_000}, {5000, 86_400_000_000}, {7, 999_999},
	} {
		c := Within(r.limit, r.per)
		var admitted []int64
		now, tat := int64(1_000_000), int64(0)
		for now < 1_000_000+4*r.per {
			var res Result
			tat, res = c.Step(tat, now)
			if res.Allowed {
				admitted = append(admitted, now)
				continue
			}
			// Sometimes right on time, sometimes late.
			now += res.RetryAfter + rng.Int64N(2)*rng.Int64N(max(c.Interval, 1))
		}
		for i, start := range admitted {
			n := int64(0)
			for _, at := range admitted[i:] {
				if at < start+r.per {
					n++
				}
			}
			if n > r.limit {
				t.Fatalf("%d per %d: %d admitted in the window from %d", r.limit, r.per, n, start)
			}
		}
		if got := int64(len(admitted)); got < 3*r.limit {
			t.Fatalf("%d per %d: %d admitted in 4 windows", r.limit, r.per, got)
		}
	}
}
