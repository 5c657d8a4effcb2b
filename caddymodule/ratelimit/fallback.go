package ratelimit

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/internal/gcra"
)

// Fallback names who decides while Redis cannot be reached in time.
type Fallback string

const (
	// FallbackLocal decides in this process, carrying on from the last TAT
	// Redis reported for the credential. Each instance then enforces the
	// whole ceiling on its own, so a cluster of n admits up to n times it
	// until Redis is back; no client sees an error meanwhile.
	FallbackLocal Fallback = "local"
	// FallbackAllow admits every request: availability over enforcement.
	FallbackAllow Fallback = "allow"
	// FallbackDeny refuses every request with 429 and Retry-After 1. A
	// 503 would tell the client the gateway is broken; 429 tells it to
	// come back, which it may do a second later.
	FallbackDeny Fallback = "deny"
)

func (f Fallback) check() error {
	switch f {
	case FallbackLocal, FallbackAllow, FallbackDeny:
		return nil
	}
	return fmt.Errorf("fallback %q: want local, allow or deny", string(f))
}

// fallBack decides a request Redis could not.
func (l *Limiter) fallBack(id string, c gcra.Cell, now int64, consume bool) Decision {
	var d Decision
	switch l.fallback {
	case FallbackDeny:
		d = Decision{Reset: time.Second, RetryAfter: time.Second}
	case FallbackAllow:
		// Admit, but let the local view fill in the headroom headers.
		d = l.local.decide(id, c, now, consume)
		d.Allowed, d.RetryAfter = true, 0
	default:
		d = l.local.decide(id, c, now, consume)
	}
	d.Fallback = true
	return d
}

// lost switches to the fallback, logging once per outage rather than once
// per request.
func (l *Limiter) lost(err error) {
	if l.redisUp.CompareAndSwap(true, false) {
		l.log.Warn("redis unreachable: rate limits are decided by the fallback until it answers again",
			zap.String("fallback", string(l.fallback)), zap.Duration("timeout", l.timeout), zap.Error(err))
	}
}

// probe tries Redis while the fallback decides, and hands decisions back
// to Redis as soon as it answers within the request timeout.
func (l *Limiter) probe(ctx context.Context) {
	if l.redisUp.Load() {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, l.timeout)
	err := l.redis.ping(pctx)
	cancel()
	if err == nil && l.redisUp.CompareAndSwap(false, true) {
		l.log.Info("redis reachable again: rate limits are shared again")
	}
}
