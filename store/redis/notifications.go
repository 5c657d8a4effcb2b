package redis

import (
	"context"
	"time"
)

const (
	keyNotices = "pgw:notice:"
	keyNonces  = "pgw:fwd:nonce:"
)

// ClaimNotification takes a vendor notification's key until ttl passes, reporting
// false if any instance took it (adapters/kit/notifications): SET NX PX.
func (s *Store) ClaimNotification(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.SetNX(ctx, keyNotices+key, "1", ttl).Result()
}

// ReleaseNotification gives a notification's key back.
func (s *Store) ReleaseNotification(ctx context.Context, key string) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.Del(ctx, keyNotices+key).Err()
}

// ClaimNonce takes a forwarded request's nonce until ttl passes,
// reporting false if any instance took it before (cluster.Nonces): SET
// NX PX, so that of instances racing on one, one wins.
func (s *Store) ClaimNonce(ctx context.Context, nonce string, ttl time.Duration) (bool, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.SetNX(ctx, keyNonces+nonce, "1", ttl).Result()
}
