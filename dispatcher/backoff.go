package dispatcher

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Schedule defaults: retries about 30 s, 3 min, 18 min, 1.8 h and 10.8 h
// after each failure, spanning just under 13 hours; the contract asks for
// at least 12.
const (
	DefaultBackoffBase   = 30 * time.Second
	DefaultBackoffFactor = 6.0
)

// maxRetryAfter bounds how long a receiver's Retry-After can hold a
// delivery back.
const maxRetryAfter = 24 * time.Hour

// maxJitter is the upper bound of the random stretch added to each delay.
const maxJitter = 0.2

// Schedule is the exponential backoff between scheduled attempts.
type Schedule struct {
	Base   time.Duration
	Factor float64
}

// MinDelay is the delay before retry n (n=1 follows the first failure)
// without jitter: Base × Factor^(n-1).
func (s Schedule) MinDelay(n int) time.Duration {
	d := float64(s.Base) * math.Pow(s.Factor, float64(n-1))
	if d > float64(math.MaxInt64)/2 {
		return math.MaxInt64 / 2
	}
	return time.Duration(d)
}

// Delay is MinDelay(n) stretched by a random [0, 20%). Jitter only ever
// lengthens a delay, so the schedule never spans less than the contract's
// minimum, while endpoints that failed together spread their retries out.
func (s Schedule) Delay(n int) time.Duration {
	d := s.MinDelay(n)
	return d + time.Duration(float64(d)*maxJitter*rand.Float64())
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date,
// clamped to [0, maxRetryAfter].
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), maxRetryAfter), true
}
