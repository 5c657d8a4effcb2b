package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

// limiterRef is the rate limiter the practicegw_ratelimit handler
// attached, so that listings and the console can read usage and headroom.
type limiterRef struct {
	mu      sync.RWMutex
	limiter *ratelimit.Limiter
	rateFor func(*credential.Credential) ratelimit.Rate
}

// UsageStore is where the embedded limiter keeps hourly usage.
func (a *App) UsageStore() ratelimit.UsageStore { return a.shared.store }

// AttachLimiter records the limiter serving this config's routes.
func (a *App) AttachLimiter(l *ratelimit.Limiter, rateFor func(*credential.Credential) ratelimit.Rate) {
	a.limiter.mu.Lock()
	defer a.limiter.mu.Unlock()
	a.limiter.limiter, a.limiter.rateFor = l, rateFor
}

// Traffic returns a credential's usage per hour since a time and its
// current headroom; ok is false when no rate limiter is configured.
func (a *App) Traffic(ctx context.Context, c *credential.Credential, since time.Time) (usage.Traffic, bool, error) {
	a.limiter.mu.RLock()
	l, rateFor := a.limiter.limiter, a.limiter.rateFor
	a.limiter.mu.RUnlock()
	if l == nil {
		return usage.Traffic{}, false, nil
	}
	rate := rateFor(c)
	hours, err := l.Usage(ctx, c.ID, since)
	if err != nil {
		return usage.Traffic{}, true, err
	}
	d := l.Peek(ctx, c.ID, rate)
	return usage.Traffic{Ceiling: rate.String(), Limit: rate.Limit, Window: int64(rate.Window / time.Second),
		Headroom: d.Remaining, Hours: hours}, true, nil
}
