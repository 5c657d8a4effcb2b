package ratelimit

import (
	"context"
	"time"

	"github.com/practicegw/practicegw/internal/gcra"
	redisstore "github.com/practicegw/practicegw/store/redis"
	"github.com/practicegw/practicegw/store/usage"
)

// redisBackend keeps every gateway instance's buckets and usage counters in
// one Redis, through store/redis's RateLimits.
//
// Decisions, one per request, go through script, which decides concurrent
// requests in batches, one script call a batch. Reading and writing usage,
// a few calls a flush, and probing share its client.
type redisBackend struct {
	client *redisstore.Client
	limits *redisstore.RateLimits
	script *scriptPipe
}

func newRedisBackend(url string, files redisstore.TLSFiles, timeout, batchInterval time.Duration) (*redisBackend, error) {
	// The caller's deadline is the only budget: a failed call goes to
	// the fallback, not round again.
	client, err := redisstore.NewDeadlineClient(url, files, timeout)
	if err != nil {
		return nil, err
	}
	limits := redisstore.NewRateLimits(client)
	return &redisBackend{client: client, limits: limits, script: newScriptPipe(limits, timeout, batchInterval)}, nil
}

// decide runs the script for one request, in one EVALSHA with the other
// requests of its batch (EVAL when Redis has not seen the script yet,
// after a restart or SCRIPT FLUSH). It answers within the timeout, or when
// ctx ends if that is sooner. now is zero outside tests, so that
// Redis's clock decides.
func (b *redisBackend) decide(ctx context.Context, id string, c gcra.Cell, consume bool, now int64) (Decision, error) {
	return b.script.do(ctx, id, c, consume, now)
}

func (b *redisBackend) ping(ctx context.Context) error { return b.client.Ping(ctx).Err() }

// AddUsage adds counts that were decided while Redis was out of reach.
func (b *redisBackend) AddUsage(ctx context.Context, id string, hour time.Time, admitted, refused int64) error {
	return b.limits.AddUsage(ctx, id, hour, admitted, refused)
}

// Usage reads the credential's hourly counts since the given time.
func (b *redisBackend) Usage(ctx context.Context, id string, since time.Time) ([]usage.Hour, error) {
	return b.limits.Usage(ctx, id, since)
}

func (b *redisBackend) close() error {
	b.script.close()
	return b.client.Close()
}
