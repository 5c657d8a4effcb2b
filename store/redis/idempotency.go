package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/store/idempotency"
)

// Begin reserves an idempotency key with SET NX, or returns what it holds.
func (s *Store) Begin(ctx context.Context, key, fingerprint string) (*idempotency.Record, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	v, err := idempotency.Seal(s.secrets, key, idempotency.Record{Fingerprint: fingerprint, CreatedAt: time.Now()})
	if err != nil {
		return nil, err
	}
	// Reserved for InFlight: a request that dies leaves nothing that
	// blocks its retry for long. Finish keeps the answer for the TTL.
	ok, err := s.rdb.SetNX(ctx, keyIdempotency+key, v, s.inFlight).Result()
	if err != nil {
		return nil, fmt.Errorf("reserving idempotency key in redis: %w", err)
	}
	if ok {
		return nil, nil
	}
	raw, err := s.rdb.Get(ctx, keyIdempotency+key).Bytes()
	if errors.Is(err, goredis.Nil) {
		// Expired between the two calls: try once more.
		return s.Begin(context.WithoutCancel(ctx), key, fingerprint)
	}
	if err != nil {
		return nil, fmt.Errorf("reading idempotency key from redis: %w", err)
	}
	rec, err := idempotency.Open(s.secrets, key, raw)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// Finish stores the answer to replay, sealed, for the TTL; a key no longer
// reserved (released after InFlight, abandoned) is not brought back.
func (s *Store) Finish(ctx context.Context, key string, rec idempotency.Record) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	v, err := idempotency.Seal(s.secrets, key, rec)
	if err != nil {
		return err
	}
	err = s.rdb.SetArgs(ctx, keyIdempotency+key, v, goredis.SetArgs{TTL: idempotency.TTL, Mode: "XX"}).Err()
	if errors.Is(err, goredis.Nil) {
		// The key is no longer reserved (expired, abandoned): nothing
		// to remember the answer under.
		return nil
	}
	return err
}

// Abandon releases a key whose request failed before it changed anything.
func (s *Store) Abandon(ctx context.Context, key string) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.Del(ctx, keyIdempotency+key).Err()
}
