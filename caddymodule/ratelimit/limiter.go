package ratelimit

import (
	"context"
	"errors"
	"fmt"
	redisstore "github.com/practicegw/practicegw/store/redis"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/internal/gcra"
)

// Config sets up a Limiter. The zero value is an in-process limiter.
type Config struct {
	// Redis is a redis:// or rediss:// URL. Set, every instance pointed at
	// it shares buckets and usage counters; empty, state stays in this
	// process.
	Redis string
	// RedisTLS are the files a rediss:// connection is made with.
	RedisTLS redisstore.TLSFiles
	// Timeout bounds each Redis call on a request's path. Default 50ms.
	Timeout time.Duration
	// BatchInterval, when set, spaces the starts of round trips to Redis
	// once requests share them: a request may wait up to this long for
	// others to join its round trip. Zero sends each batch as soon as the
	// last one returns.
	BatchInterval time.Duration
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
	// Logger receives one line each time Redis, or writing usage, fails
	// or works again: never one per request.
	Logger *zap.Logger
}

// Defaults for Config.
const (
	defaultTimeout       = 50 * time.Millisecond
	defaultFlushInterval = 5 * time.Second
	defaultProbeInterval = 500 * time.Millisecond
)

const (
	sweepInterval = time.Minute
	// storeTimeout bounds each write of a usage batch and each usage
	// read; both are off the request path, so they may take longer than
	// Timeout.
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
		l.timeout = defaultTimeout
	}
	if l.fallback == "" {
		l.fallback = FallbackLocal
	}
	if err := l.fallback.check(); err != nil {
		return nil, err
	}
	flushEvery := orDefault(cfg.FlushInterval, defaultFlushInterval)
	probeEvery := orDefault(cfg.ProbeInterval, defaultProbeInterval)

	if cfg.Redis != "" {
		rb, err := newRedisBackend(cfg.Redis, cfg.RedisTLS, l.timeout, max(cfg.BatchInterval, 0))
		if err != nil {
			return nil, err
		}
		l.redis, l.store = rb, rb
		l.redisUp.Store(true)
	} else if l.store == nil {
		l.store = newMemoryUsage()
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

// Count counts one request of credentialID that the gateway served
// without deciding it against the credential's ceiling (a console page its
// administrator opened): it shows in the credential's usage and spends
// none of its quota.
func (l *Limiter) Count(credentialID string) { l.tally.count(credentialID, l.clock(), true) }

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

func (l *Limiter) fromRedis(ctx context.Context, id string, c gcra.Cell, consume bool) (Decision, bool) {
	if !l.redisUp.Load() {
		return Decision{}, false
	}
	d, err := l.redis.decide(ctx, id, c, consume, 0) // within l.timeout
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
			l.redisUp.Store(false) // closed, not lost: nothing to log
			err = errors.Join(err, l.redis.close())
		}
		l.closeErr = err
	})
	return l.closeErr
}
