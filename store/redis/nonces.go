package redis

import (
	"context"
	"time"
)

const keyNonces = "pgw:fwd:nonce:"

// ClaimNonce takes a forwarded request's nonce until ttl passes,
// reporting false if any instance took it before (cluster.Nonces): SET
// NX PX, so that of instances racing on one, one wins.
func (s *Store) ClaimNonce(ctx context.Context, nonce string, ttl time.Duration) (bool, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.SetNX(ctx, keyNonces+nonce, "1", ttl).Result()
}
