package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"
)

const keyUpstream = "pgw:upstream:"

// Last returns the last state an upstream adapter saw of a record (nil if
// never seen), shared by every instance so that a vendor notification
// received by any of them is compared with the same state.
func (s *Store) Last(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	v, err := s.rdb.Get(ctx, keyUpstream+key).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	return v, err
}

// Save records the state an upstream adapter has now seen of a record.
func (s *Store) Save(ctx context.Context, key string, state []byte) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.Set(ctx, keyUpstream+key, state, 0).Err()
}
