// Package gcra is the one Go implementation of the generic cell rate
// algorithm, shared by the gateway's rate limiter and the vendor budgets.
//
// GCRA keeps one number per key: the theoretical arrival time (TAT) at which
// its bucket would be empty of bookings if requests had arrived exactly one
// interval apart. A request is admitted when booking one more interval keeps
// TAT within the tolerance (burst × interval) of now. Unlike a fixed window
// it has no boundary at which twice the quota gets through, and unlike a
// token bucket it needs no refill: the state is a single timestamp.
//
// Times are plain integers in whatever unit the caller picks (the limiter
// uses microseconds so that its Lua twin does the same integer arithmetic;
// the budgets use nanoseconds), as long as TAT, now, Interval and Tolerance
// share it.
package gcra

// Cell is one rate as GCRA sees it.
type Cell struct {
	Interval  int64 // T: one request's share of the window
	Tolerance int64 // B·T: how far ahead of now the bucket may be booked
}

// Result is what one request meets, in the cell's unit.
type Result struct {
	Allowed bool
	// Remaining is how many more requests would be admitted right now.
	Remaining int64
	// Reset is how long until the bucket is full again.
	Reset int64
	// RetryAfter is how long a refused request should wait; zero when
	// allowed.
	RetryAfter int64
}

// Step books one request at now against tat and returns the TAT to store.
// A refusal returns tat unchanged, so refused requests cost the caller
// nothing.
func (c Cell) Step(tat, now int64) (next int64, r Result) {
	tat = max(tat, now)
	next = tat + c.Interval
	allowAt := next - c.Tolerance
	if now < allowAt {
		return tat, Result{Reset: tat - now, RetryAfter: allowAt - now}
	}
	return next, Result{
		Allowed:   true,
		Remaining: (c.Tolerance - (next - now)) / c.Interval,
		Reset:     next - now,
	}
}

// Peek reports what one more request would meet at now, without booking it.
func (c Cell) Peek(tat, now int64) Result {
	tat = max(tat, now)
	r := Result{
		Remaining: max(c.Tolerance-(tat-now), 0) / c.Interval,
		Reset:     tat - now,
	}
	r.Allowed = r.Remaining > 0
	if !r.Allowed {
		r.RetryAfter = tat + c.Interval - c.Tolerance - now
	}
	return r
}

// Within is the cell that admits at most limit requests in any window of
// length per, wherever the window starts: a vendor publishing "120 calls a
// minute" counts every minute, not a minute since an idle start. A burst
// of a tenth of the limit goes at once and the rest are spread evenly; a
// burst of the whole limit would let nearly twice the limit through in
// the first window (the burst, then a full window's rate).
func Within(limit, per int64) Cell {
	limit = max(limit, 1)
	burst := max(limit/10, 1)
	// After the burst at t, one request fits at t+I, t+2I, ...: a window
	// [t, t+per) holds burst + ceil(per/I) - 1 of them, at most limit
	// when I = per / (limit - burst + 1).
	// Rounded up, so that rounding never fits one more in.
	n := limit - burst + 1
	interval := max((per+n-1)/n, 1)
	return Cell{Interval: interval, Tolerance: burst * interval}
}
