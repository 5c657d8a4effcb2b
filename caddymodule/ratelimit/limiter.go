package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
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

// Config sets up a Limiter. The zero value is an in-process limiter.
type Config struct {
	// Redis is a redis:// or rediss:// URL. Set, every instance pointed at
	// it shares buckets and usage counters; empty, state stays in this
	// process.
	Redis string
	// Timeout bounds each Redis call on a request's path. Default 50ms.
	Timeout time.Duration
	// Fallback decides requests while Redis is unreachable. Default
	// FallbackLocal.
	Fallback Fallback
	// Usage keeps hourly usage without Redis (with Redis, Redis keeps it).
	// Default: in memory, lost on restart.
	Usage UsageStore
	// FlushInterval is how often counted usage is written to Usage, or to
	// Redis for requests decided while it was away. Default 5s.
	FlushInterval time.Duration
	// ProbeInterval is how often Redis is tried while the fallback
	// decides. Default 500ms.
	ProbeInterval time.Duration
	// Clock is the in-process limiter's time. Default time.Now. Redis
	// decisions use Redis's clock, which every instance shares.
	Clock func() time.Time
	// Logger receives one line each time Redis is lost or found again.
	Logger *zap.Logger
}

// Defaults for Config.
const (
	DefaultTimeout       = 50 * time.Millisecond
	DefaultFlushInterval = 5 * time.Second
	DefaultProbeInterval = 500 * time.Millisecond
)

const (
	sweepInterval = time.Minute
	// storeTimeout bounds each write of a usage batch; a batch is off the
	// request path, so it may take longer than Timeout.
	storeTimeout = time.Second
	// closeTimeout bounds the last flush on Close, so a Redis that is
	// gone cannot hold up shutdown for long.
	closeTimeout = 2 * time.Second
)

// Limiter enforces per-credential rates with GCRA and counts each
// credential's requests per hour. It is safe for concurrent use; Close
// stops its goroutines and writes out the usage it still holds.
type Limiter struct {
	clock    func() time.Time
	log      *zap.Logger
	timeout  time.Duration
	fallback Fallback

	local buckets
	redis *redisBackend // nil: in-process only
	// redisUp is false from a failed Redis call until a probe succeeds;
	// meanwhile requests go straight to the fallback instead of each
	// spending its timeout on a Redis that is known to be away.
	redisUp atomic.Bool

	store UsageStore // where counted usage goes: Redis, Config.Usage or memory
	tally tally      // usage counted here and not yet in store
	// flushMu makes a count be either in store or in tally whenever Usage
	// reads both.
	flushMu sync.Mutex

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New starts a Limiter. With Redis set it does not wait for Redis: a Redis
// that is down at start is met by the fallback like one that goes down
// later.
func New(cfg Config) (*Limiter, error) {
	l := &Limiter{
		clock:    cfg.Clock,
		log:      cfg.Logger,
		timeout:  cfg.Timeout,
		fallback: cfg.Fallback,
		store:    cfg.Usage,
	}
	if l.clock == nil {
		l.clock = time.Now
	}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	if l.timeout <= 0 {
		l.timeout = DefaultTimeout
	}
	if l.fallback == "" {
		l.fallback = FallbackLocal
	}
	if err := l.fallback.check(); err != nil {
		return nil, err
	}
	flushEvery := orDefault(cfg.FlushInterval, DefaultFlushInterval)
	probeEvery := orDefault(cfg.ProbeInterval, DefaultProbeInterval)

	if cfg.Redis != "" {
		rb, err := newRedisBackend(cfg.Redis, l.timeout)
		if err != nil {
			return nil, err
		}
		l.redis, l.store = rb, rb
		l.redisUp.Store(true)
	} else if l.store == nil {
		l.store = NewMemoryUsage()
	}

	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	flushFailing := false // only this goroutine reads or writes it
	l.every(ctx, flushEvery, func(ctx context.Context) {
		if l.redis != nil && !l.redisUp.Load() {
			return // kept for when Redis is back
		}
		// Logged when writing starts or stops failing, not every interval.
		err := l.flush(ctx)
		if (err != nil) != flushFailing {
			flushFailing = err != nil
			if err != nil {
				l.log.Warn("writing rate limit usage failed; kept in memory for the next try", zap.Error(err))
			} else {
				l.log.Info("writing rate limit usage works again")
			}
		}
	})
	l.every(ctx, sweepInterval, func(context.Context) { l.local.sweep(l.clock().UnixMicro()) })
	if l.redis != nil {
		l.every(ctx, probeEvery, l.probe)
	}
	return l, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// every runs f each interval until ctx ends; Close waits for it.
func (l *Limiter) every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f(ctx)
			}
		}
	}()
}

// Allow decides one request of credentialID under rate and counts it in
// the credential's usage. It always answers within about Config.Timeout:
// when Redis does not, the fallback does.
func (l *Limiter) Allow(ctx context.Context, credentialID string, rate Rate) Decision {
	return l.decide(ctx, credentialID, rate, true)
}

// Peek reports the credential's headroom under rate (Remaining, Reset)
// without spending or counting anything.
func (l *Limiter) Peek(ctx context.Context, credentialID string, rate Rate) Decision {
	return l.decide(ctx, credentialID, rate, false)
}

func (l *Limiter) decide(ctx context.Context, id string, rate Rate, consume bool) Decision {
	c := rate.cell()
	var d Decision
	if l.redis != nil {
		var ok bool
		if d, ok = l.fromRedis(ctx, id, c, consume); ok {
			d.Limit = rate.Limit
			return d // counted by the script
		}
	}
	now := l.clock()
	if l.redis == nil {
		d = l.local.decide(id, c, now.UnixMicro(), consume)
	} else {
		d = l.fallBack(id, c, now.UnixMicro(), consume)
	}
	d.Limit = rate.Limit
	if consume {
		l.tally.count(id, now, d.Allowed)
	}
	return d
}

func (l *Limiter) fromRedis(ctx context.Context, id string, c cell, consume bool) (Decision, bool) {
	if !l.redisUp.Load() {
		return Decision{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	d, err := l.redis.decide(rctx, id, c, consume, 0)
	cancel()
	if err != nil {
		// A client that hung up says nothing about Redis.
		if ctx.Err() == nil {
			l.lost(err)
		}
		return Decision{}, false
	}
	l.local.follow(id, l.clock().UnixMicro()+d.Reset.Microseconds())
	return d, true
}

func (l *Limiter) fallBack(id string, c cell, now int64, consume bool) Decision {
	var d Decision
	switch l.fallback {
	case FallbackDeny:
		d = Decision{Reset: time.Second, RetryAfter: time.Second}
	case FallbackAllow:
		// The local view still gives honest-looking headers.
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

// Usage returns credentialID's requests per hour since the given time,
// oldest first, hours without requests left out. With Redis it covers
// every instance; without, this process and the UsageStore.
func (l *Limiter) Usage(ctx context.Context, credentialID string, since time.Time) ([]HourUsage, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	stored, err := l.store.Usage(ctx, credentialID, since)
	if err != nil {
		return nil, fmt.Errorf("reading usage of %s: %w", credentialID, err)
	}
	return merge(stored, l.tally.of(credentialID, since.Unix()/3600)), nil
}

// flush writes the tally to the store, one call per credential and hour.
// What the store refuses stays in the tally for the next flush.
func (l *Limiter) flush(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	pending := l.tally.take()
	failed := map[hourKey]counts{}
	var errs []error
	for k, c := range pending {
		wctx, cancel := context.WithTimeout(ctx, storeTimeout)
		err := l.store.AddUsage(wctx, k.id, time.Unix(k.hour*3600, 0).UTC(), c.admitted, c.refused)
		cancel()
		if err != nil {
			failed[k] = c
			errs = append(errs, err)
		}
	}
	l.tally.putBack(failed, l.clock())
	return errors.Join(errs...)
}

// Close stops the limiter's goroutines, writes out the usage it holds and
// closes its Redis connections. Allow and Peek keep answering after Close,
// from the fallback.
func (l *Limiter) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		l.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		err := l.flush(ctx)
		if err != nil {
			err = fmt.Errorf("rate limit usage lost on close: %w", err)
		}
		if l.redis != nil {
			err = errors.Join(err, l.redis.close())
		}
		l.closeErr = err
	})
	return l.closeErr
}
