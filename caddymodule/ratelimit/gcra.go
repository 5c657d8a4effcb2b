package ratelimit

import "time"

// Decision is the limiter's answer for one request.
type Decision struct {
	Allowed bool
	// Limit is the quota of the policy applied (q in RateLimit-Policy).
	Limit int64
	// Remaining is how many more requests would be admitted right now.
	Remaining int64
	// Reset is how long until the bucket is full again (t in RateLimit).
	Reset time.Duration
	// RetryAfter is how long a refused request should wait; zero when
	// allowed.
	RetryAfter time.Duration
	// Fallback says Redis could not be asked and the configured fallback
	// decided instead.
	Fallback bool
}

// GCRA, the generic cell rate algorithm, keeps one number per credential:
// the theoretical arrival time (TAT) at which its bucket would be empty of
// bookings if requests had arrived exactly one interval apart. A request is
// admitted when booking one more interval keeps TAT within the tolerance
// (burst × interval) of now. Unlike a fixed window it has no boundary at
// which twice the quota gets through, and unlike a token bucket it needs no
// refill: the state is a single timestamp.
//
// step is the whole algorithm for one request at now (microseconds). It
// returns the TAT to store; a refusal returns tat unchanged, so refused
// requests cost the client nothing. gcra.lua is the same function in Lua;
// TestScriptMatchesStep keeps the two in step.
func (c cell) step(tat, now int64, consume bool) (next int64, d Decision) {
	tat = max(tat, now)
	if !consume {
		return tat, c.peek(tat, now)
	}
	next = tat + c.interval
	allowAt := next - c.tolerance
	if now < allowAt {
		return tat, Decision{Reset: usec(tat - now), RetryAfter: usec(allowAt - now)}
	}
	return next, Decision{
		Allowed:   true,
		Remaining: (c.tolerance - (next - now)) / c.interval,
		Reset:     usec(next - now),
	}
}

// peek reports what one more request would meet, without booking it.
func (c cell) peek(tat, now int64) Decision {
	d := Decision{
		Remaining: max(c.tolerance-(tat-now), 0) / c.interval,
		Reset:     usec(tat - now),
	}
	d.Allowed = d.Remaining > 0
	if !d.Allowed {
		d.RetryAfter = usec(tat + c.interval - c.tolerance - now)
	}
	return d
}

func usec(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
