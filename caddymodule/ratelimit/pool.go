package ratelimit

import (
	"fmt"
	redisstore "github.com/practicegw/practicegw/store/redis"
	"reflect"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// limiters holds the Limiters in use, so that buckets, usage not yet
// flushed and Redis connections survive a config reload: the new config
// acquires the old config's Limiter before the old one releases it.
var limiters = caddy.NewUsagePool()

// poolKey is what makes two Configs share a Limiter.
type poolKey struct {
	redis        string
	redisTLS     redisstore.TLSFiles
	timeout      time.Duration
	batch        time.Duration
	fallback     Fallback
	flush, probe time.Duration
	usage        UsageStore
}

func keyOf(cfg Config) (poolKey, error) {
	if cfg.Usage != nil && !reflect.TypeOf(cfg.Usage).Comparable() {
		return poolKey{}, fmt.Errorf("usage store %T cannot be told apart from another; pass a pointer", cfg.Usage)
	}
	fallback := cfg.Fallback
	if fallback == "" {
		fallback = FallbackLocal
	}
	// Defaults are spelled out so that "unset" and "set to the default"
	// share a Limiter.
	return poolKey{
		redis:    cfg.Redis,
		redisTLS: cfg.RedisTLS,
		timeout:  orDefault(cfg.Timeout, defaultTimeout),
		batch:    max(cfg.BatchInterval, 0),
		fallback: fallback,
		flush:    orDefault(cfg.FlushInterval, defaultFlushInterval),
		probe:    orDefault(cfg.ProbeInterval, defaultProbeInterval),
		usage:    cfg.Usage,
	}, nil
}

type pooled struct{ *Limiter }

func (p pooled) Destruct() error { return p.Close() }

// Acquire returns the Limiter of this process for cfg, starting it if no
// other holder of an equal Config has. Equal means the same Redis,
// Timeout, BatchInterval, Fallback, intervals and Usage store; Clock and
// Logger come from the first to acquire. Every Acquire that succeeds needs one Release.
func Acquire(cfg Config) (*Limiter, error) {
	key, err := keyOf(cfg)
	if err != nil {
		return nil, err
	}
	v, _, err := limiters.LoadOrNew(key, func() (caddy.Destructor, error) {
		l, err := New(cfg)
		if err != nil {
			return nil, err
		}
		return pooled{l}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(pooled).Limiter, nil
}

// Release gives back a Limiter got from Acquire with cfg; the last release
// closes it.
func Release(cfg Config) error {
	key, err := keyOf(cfg)
	if err != nil {
		return err
	}
	_, err = limiters.Delete(key)
	return err
}
