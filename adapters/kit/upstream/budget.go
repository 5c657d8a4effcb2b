package upstream

import (
	"context"
	"sync"
	"time"

	"github.com/practicegw/practicegw/internal/gcra"
)

// Budget spends a vendor's request allowance. Take books one request
// against key when limit requests per period allow it now and returns 0;
// otherwise it books nothing and returns how long until one would fit.
// Keys name a vendor account (system and a digest of its credentials), so
// every adapter and every instance calling that account draws from one
// allowance.
type Budget interface {
	Take(ctx context.Context, key string, limit int, per time.Duration) (wait time.Duration, err error)
}

// take books one request at now (Unix nanoseconds) against tat with GCRA
// (internal/gcra): a burst of limit requests, then one per per/limit, with
// no window edge at which twice the limit gets through. It returns the TAT
// to store and, when the request does not fit, how long until one would.
// store/redis.Budget runs the same step in Lua.
func take(tat, now int64, limit int, per time.Duration) (next int64, wait time.Duration) {
	c := gcra.Cell{Interval: int64(per / time.Duration(max(limit, 1))), Tolerance: int64(per)}
	next, r := c.Step(tat, now)
	return next, time.Duration(r.RetryAfter)
}

// LocalBudget keeps budgets in this process. It is what an adapter uses
// when Deps.Budget is nil, and right for a single gateway instance.
type LocalBudget struct {
	clock Clock
	mu    sync.Mutex
	tats  map[string]int64 // Unix nanoseconds
}

// NewLocalBudget makes an in-process budget on clock (nil: system clock).
func NewLocalBudget(clock Clock) *LocalBudget {
	if clock == nil {
		clock = SystemClock{}
	}
	return &LocalBudget{clock: clock, tats: map[string]int64{}}
}

func (b *LocalBudget) Take(_ context.Context, key string, limit int, per time.Duration) (time.Duration, error) {
	now := b.clock.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	next, wait := take(b.tats[key], now, limit, per)
	b.tats[key] = next
	// Keys of idle accounts would otherwise stay forever; one sweep per
	// thousand keys keeps the map to the accounts in use.
	if len(b.tats) > 1000 {
		for k, t := range b.tats {
			if t < now {
				delete(b.tats, k)
			}
		}
	}
	return wait, nil
}
