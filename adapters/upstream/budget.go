package upstream

import (
	"context"
	"sync"
	"time"
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

// gcra is the generic cell rate algorithm over one stored time, the
// theoretical arrival time (TAT): a request fits when booking one more
// interval (per/limit) keeps TAT within per of now. It allows a burst of
// limit requests and then one per interval, with no window edge at which
// twice the limit gets through. RedisBudget runs the same step in Lua.
func gcra(tat, now time.Time, limit int, per time.Duration) (next time.Time, wait time.Duration) {
	interval := per / time.Duration(max(limit, 1))
	if tat.Before(now) {
		tat = now
	}
	next = tat.Add(interval)
	if w := next.Sub(now) - per; w > 0 {
		return tat, w
	}
	return next, 0
}

// LocalBudget keeps budgets in this process. It is what an adapter uses
// when Deps.Budget is nil, and right for a single gateway instance.
type LocalBudget struct {
	clock Clock
	mu    sync.Mutex
	tats  map[string]time.Time
}

// NewLocalBudget makes an in-process budget on clock (nil: system clock).
func NewLocalBudget(clock Clock) *LocalBudget {
	if clock == nil {
		clock = SystemClock{}
	}
	return &LocalBudget{clock: clock, tats: map[string]time.Time{}}
}

func (b *LocalBudget) Take(_ context.Context, key string, limit int, per time.Duration) (time.Duration, error) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	next, wait := gcra(b.tats[key], now, limit, per)
	b.tats[key] = next
	// Keys of idle accounts would otherwise stay forever; one sweep per
	// thousand keys keeps the map to the accounts in use.
	if len(b.tats) > 1000 {
		for k, t := range b.tats {
			if t.Before(now) {
				delete(b.tats, k)
			}
		}
	}
	return wait, nil
}
