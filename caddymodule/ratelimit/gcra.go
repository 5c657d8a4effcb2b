package ratelimit

import (
	"time"

	"github.com/practicegw/practicegw/internal/gcra"
)

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

// step is GCRA (internal/gcra) for one request at now (microseconds),
// booking it when consume is set and only peeking otherwise. It returns the
// TAT to store; a refusal returns tat unchanged, so refused requests cost
// the client nothing. store/redis runs the same function in Lua;
// TestScriptMatchesStep keeps the two in step.
func step(g gcra.Cell, tat, now int64, consume bool) (next int64, d Decision) {
	var r gcra.Result
	if consume {
		next, r = g.Step(tat, now)
	} else {
		next, r = max(tat, now), g.Peek(tat, now)
	}
	return next, decision(r)
}

// decision is r in time units.
func decision(r gcra.Result) Decision {
	return Decision{
		Allowed:    r.Allowed,
		Remaining:  r.Remaining,
		Reset:      usec(r.Reset),
		RetryAfter: usec(r.RetryAfter),
	}
}

func usec(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
