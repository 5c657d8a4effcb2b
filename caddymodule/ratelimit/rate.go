package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/practicegw/practicegw/internal/gcra"
)

// Rate is a ceiling: Limit requests per Window.
type Rate struct {
	Limit  int64
	Window time.Duration
	// Burst is how many requests may arrive at once after a quiet spell.
	// Zero means Limit: the whole window's quota may be spent at once,
	// which is what the advertised policy q=Limit;w=Window promises.
	Burst int64
}

// units are the windows a rate may name. Longer windows are left out on
// purpose: an hourly ceiling already spans a client's working session.
var units = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRate reads "N/s", "N/m" or "N/h" with N ≥ 1, as credentials and the
// PRACTICEGW_RATE_LIMIT variable spell ceilings.
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m or N/h, such as 7200/h", s)
	}
	window, ok := units[unit]
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: unit %q is not s, m or h", s, unit)
	}
	limit, err := strconv.ParseInt(n, 10, 64)
	if err != nil || limit < 1 || n[0] == '+' {
		return Rate{}, fmt.Errorf("rate %q: %q is not a whole number of at least 1", s, n)
	}
	r := Rate{Limit: limit, Window: window}
	if r.Window.Microseconds() < limit {
		return Rate{}, fmt.Errorf("rate %q: more than one request per microsecond is not a ceiling", s)
	}
	return r, nil
}

// String spells r the way ParseRate reads it; Burst is not part of it.
func (r Rate) String() string {
	for unit, d := range units {
		if d == r.Window {
			return strconv.FormatInt(r.Limit, 10) + "/" + unit
		}
	}
	return strconv.FormatInt(r.Limit, 10) + "/" + r.Window.String()
}

// cell is r as GCRA sees it, in whole microseconds so that the in-process
// limiter and the Redis script do the same integer arithmetic.
func (r Rate) cell() gcra.Cell {
	// A Rate that did not come from ParseRate is clamped rather than
	// trusted: a division by zero here would fail the request.
	limit := max(r.Limit, 1)
	burst := r.Burst
	if burst <= 0 || burst > limit {
		burst = limit
	}
	// Rounding T up keeps the rate at or below the ceiling.
	interval := max((r.Window.Microseconds()+limit-1)/limit, 1)
	return gcra.Cell{Interval: interval, Tolerance: burst * interval}
}
