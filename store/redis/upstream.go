package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
)

const keyUpstream = "pgw:upstream:"

// Every upstream state value is sealed, bound to the key it is kept
// under: the store holds vendors' rotated refresh tokens (which grant
// access to a firm's systems) beside states that grant nothing (XPM's
// first-seen stamps, records' last states). Sealing them all costs one
// AES-GCM step per read or write and spares every adapter from having to
// say which of its values are secret, so none can be forgotten.
func whatUpstream(key string) string { return "upstream-state:" + key }

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
	if err != nil {
		return nil, err
	}
	if !sealed.IsSealed(v) {
		// An earlier version's plain text (one still running during a
		// rolling upgrade may write it): sealed in place, unless it
		// changed meanwhile.
		return v, s.sealUpstream(ctx, keyUpstream+key, v)
	}
	state, err := s.secrets.Open(v, whatUpstream(key))
	if err != nil {
		return nil, fmt.Errorf("upstream state %s: %w", key, err)
	}
	return state, nil
}

// Save records the state an upstream adapter has now seen of a record.
func (s *Store) Save(ctx context.Context, key string, state []byte) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.Set(ctx, keyUpstream+key, s.secrets.Seal(state, whatUpstream(key)), 0).Err()
}

// sealUpstream replaces the plain value at redisKey with it sealed, if
// the key still holds plain.
func (s *Store) sealUpstream(ctx context.Context, redisKey string, plain []byte) error {
	sealedValue := s.secrets.Seal(plain, whatUpstream(strings.TrimPrefix(redisKey, keyUpstream)))
	if err := replaceScript.Run(ctx, s.rdb, []string{redisKey}, plain, sealedValue).Err(); err != nil {
		return fmt.Errorf("sealing upstream state in redis: %w", err)
	}
	return nil
}

// sealUpstreamState seals every upstream state value an earlier version
// stored in plain text.
func (s *Store) sealUpstreamState(ctx context.Context) error {
	for cursor := uint64(0); ; {
		cctx, cancel := s.ctx(ctx)
		keys, next, err := s.rdb.Scan(cctx, cursor, keyUpstream+"*", 500).Result()
		cancel()
		if err != nil {
			return fmt.Errorf("listing upstream state to seal: %w", err)
		}
		for _, k := range keys {
			if err := s.sealUpstreamKey(ctx, k); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

func (s *Store) sealUpstreamKey(ctx context.Context, redisKey string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := s.rdb.Get(ctx, redisKey).Bytes()
	if isNil(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s to seal it: %w", redisKey, err)
	}
	if sealed.IsSealed(v) {
		return nil
	}
	return s.sealUpstream(ctx, redisKey, v)
}

// Forget removes every upstream state whose key starts with prefix: what
// an adapter kept of an organisation a firm no longer serves. The keys
// are found by SCAN (never KEYS, which would block every other client)
// and unlinked a page at a time; a key saved meanwhile under the prefix
// may survive, which the caller prevents by stopping its writers first.
func (s *Store) Forget(ctx context.Context, prefix string) error {
	if prefix == "" {
		return changes.ErrForgetAll
	}
	match := keyUpstream + globEscape(prefix) + "*"
	for cursor := uint64(0); ; {
		cctx, cancel := s.ctx(ctx)
		keys, next, err := s.rdb.Scan(cctx, cursor, match, 500).Result()
		if err == nil && len(keys) > 0 {
			err = s.rdb.Unlink(cctx, keys...).Err()
		}
		cancel()
		if err != nil {
			return fmt.Errorf("forgetting upstream state under %q: %w", prefix, err)
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// saveFencedScript sets KEYS[1] to ARGV[3] unless the fence ARGV[1] of
// hash KEYS[2] is past generation ARGV[2] (-1 then). Like the fenced
// checkpoint's, its keys do not share a slot on Redis Cluster.
var saveFencedStateScript = goredis.NewScript(`
local fence = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '-1')
if fence > tonumber(ARGV[2]) then return -1 end
redis.call('SET', KEYS[1], ARGV[3])
return 1`)

// SaveFenced implements readmodel.FencedState.
func (s *Store) SaveFenced(ctx context.Context, f readmodel.Fence, key string, state []byte) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	n, err := saveFencedStateScript.Run(ctx, s.rdb, []string{keyUpstream + key, fenceKey(f.Firm)},
		f.Name, f.Generation, s.secrets.Seal(state, whatUpstream(key))).Int()
	switch {
	case err != nil:
		return fmt.Errorf("saving upstream state %s in redis: %w", key, err)
	case n < 0:
		return fmt.Errorf("upstream state %s: %w", key, readmodel.ErrFenced)
	}
	return nil
}

// swapStateScript sets KEYS[1] to ARGV[2] if it holds ARGV[1] (nothing,
// when ARGV[1] is empty: a sealed value never is), unless the fence
// ARGV[3] of hash KEYS[2] is past generation ARGV[4] (-1 then); no fence
// is checked when ARGV[3] is empty.
var swapStateScript = goredis.NewScript(`
if ARGV[3] ~= '' then
  local fence = tonumber(redis.call('HGET', KEYS[2], ARGV[3]) or '-1')
  if fence > tonumber(ARGV[4]) then return -1 end
end
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  if cur then return 0 end
elseif cur ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
return 1`)

// Swap implements changes.Swapper. A sealed value differs from every
// other sealing of the same state, so the one read is what the script
// compares: the state is read and opened, compared with old, and saved
// only if the key still holds the value read.
func (s *Store) Swap(ctx context.Context, key string, old, state []byte) (bool, error) {
	return s.swap(ctx, nil, key, old, state)
}

// SwapFenced implements readmodel.FencedSwapper.
func (s *Store) SwapFenced(ctx context.Context, f readmodel.Fence, key string, old, state []byte) (bool, error) {
	return s.swap(ctx, &f, key, old, state)
}

func (s *Store) swap(ctx context.Context, f *readmodel.Fence, key string, old, state []byte) (bool, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	raw, err := s.rdb.Get(ctx, keyUpstream+key).Bytes()
	switch {
	case errors.Is(err, goredis.Nil):
		raw, err = nil, nil
	case err != nil:
		return false, fmt.Errorf("reading upstream state %s in redis: %w", key, err)
	}
	cur := raw
	if raw != nil && sealed.IsSealed(raw) {
		if cur, err = s.secrets.Open(raw, whatUpstream(key)); err != nil {
			return false, fmt.Errorf("upstream state %s: %w", key, err)
		}
	}
	if (cur == nil) != (old == nil) || !bytes.Equal(cur, old) {
		return false, nil
	}
	keys := []string{keyUpstream + key}
	args := []any{raw, s.secrets.Seal(state, whatUpstream(key)), "", 0}
	if f != nil {
		keys = append(keys, fenceKey(f.Firm))
		args[2], args[3] = f.Name, f.Generation
	}
	n, err := swapStateScript.Run(ctx, s.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return false, fmt.Errorf("saving upstream state %s in redis: %w", key, err)
	case n < 0:
		return false, fmt.Errorf("upstream state %s: %w", key, readmodel.ErrFenced)
	}
	return n == 1, nil
}

var (
	_ readmodel.FencedState   = (*Store)(nil)
	_ readmodel.FencedSwapper = (*Store)(nil)
	_ changes.Swapper         = (*Store)(nil)
)
