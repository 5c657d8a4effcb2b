package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed gcra.lua
var gcraSource string

// redisBackend keeps every gateway instance's buckets and usage counters in
// one Redis. One script call decides a batch of requests, often for many
// credentials, so the keys must all live on one Redis (not Redis
// Cluster). Both keys of a credential carry it as a hash tag ({id}), which
// keeps a credential's keys together should batches ever be split by slot.
//
// Decisions, one per request, go through script, which decides concurrent
// requests in batches, one script call a batch. Reading and writing usage,
// a few calls a flush, and probing share its client.
type redisBackend struct {
	client *redis.Client
	script *scriptPipe
}

func newRedisBackend(url string, timeout, batchInterval time.Duration) (*redisBackend, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	// The caller's deadline is the only budget: no retries, no dial
	// back-off, no client-side wait that could outlast the request's
	// timeout. A failed call goes to the fallback, not round again.
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.PoolTimeout = timeout
	client := redis.NewClient(opt)
	return &redisBackend{client: client, script: newScriptPipe(client, timeout, batchInterval)}, nil
}

// decide runs the script for one request, in one EVALSHA with the other
// requests of its batch (EVAL when Redis has not seen the script yet,
// after a restart or SCRIPT FLUSH). It answers within the timeout, or when
// ctx ends if that is sooner. now is zero outside tests, so that
// Redis's clock decides.
func (b *redisBackend) decide(ctx context.Context, id string, c cell, consume bool, now int64) (Decision, error) {
	return b.script.do(ctx, id, c, consume, now)
}

func (b *redisBackend) ping(ctx context.Context) error { return b.client.Ping(ctx).Err() }

// AddUsage adds counts that were decided while Redis was out of reach.
// It does not trim: the script does that within the hour.
func (b *redisBackend) AddUsage(ctx context.Context, id string, hour time.Time, admitted, refused int64) error {
	h := strconv.FormatInt(hour.Unix()/3600, 10)
	key := usageKey(id)
	_, err := b.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if admitted != 0 {
			p.HIncrBy(ctx, key, h+":a", admitted)
		}
		if refused != 0 {
			p.HIncrBy(ctx, key, h+":r", refused)
		}
		p.PExpire(ctx, key, retentionHours*time.Hour)
		return nil
	})
	return err
}

// Usage reads the credential's hourly counts since the given time.
func (b *redisBackend) Usage(ctx context.Context, id string, since time.Time) ([]HourUsage, error) {
	fields, err := b.client.HGetAll(ctx, usageKey(id)).Result()
	if err != nil {
		return nil, err
	}
	from := since.Unix() / 3600
	byHour := map[int64]*HourUsage{}
	for field, v := range fields {
		hs, kind, ok := strings.Cut(field, ":")
		if !ok {
			continue // the "trimmed" marker
		}
		h, err1 := strconv.ParseInt(hs, 10, 64)
		n, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil || h < from {
			continue
		}
		u := byHour[h]
		if u == nil {
			u = &HourUsage{Hour: time.Unix(h*3600, 0).UTC()}
			byHour[h] = u
		}
		switch kind {
		case "a":
			u.Admitted += n
		case "r":
			u.Refused += n
		}
	}
	out := make([]HourUsage, 0, len(byHour))
	for _, u := range byHour {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b HourUsage) int { return a.Hour.Compare(b.Hour) })
	return out, nil
}

func (b *redisBackend) close() error {
	b.script.close()
	return b.client.Close()
}
