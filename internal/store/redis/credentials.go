package redis

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/caddymodule/auth"
)

const (
	keyCredential  = "pgw:cred:"       // + id -> JSON
	keyFirmCreds   = "pgw:creds:firm:" // + firm -> set of ids
	keyAllCreds    = "pgw:creds"       // set of ids
	keyLastUsed    = "pgw:cred:lastused"
	keyRevocations = "pgw:cred:revoked" // zset id -> unix ms
	keySigningKey  = "pgw:signing_key"
	keyIdempotency = "pgw:idem:"
)

// SaveCredential implements auth.Store.
func (s *Store) SaveCredential(ctx context.Context, c *auth.Credential) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, keyCredential+c.ID, v, 0)
		p.SAdd(ctx, keyFirmCreds+c.Firm, c.ID)
		p.SAdd(ctx, keyAllCreds, c.ID)
		if c.RevokedAt != nil {
			p.ZAdd(ctx, keyRevocations, goredis.Z{Score: float64(c.RevokedAt.UnixMilli()), Member: c.ID})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("saving credential in redis: %w", err)
	}
	return nil
}

// Credential implements auth.Store.
func (s *Store) Credential(ctx context.Context, id string) (*auth.Credential, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	var (
		doc  *goredis.StringCmd
		used *goredis.StringCmd
	)
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		doc = p.Get(ctx, keyCredential+id)
		used = p.HGet(ctx, keyLastUsed, id)
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("reading credential from redis: %w", err)
	}
	raw, err := doc.Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, auth.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var c auth.Credential
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("decoding credential %s: %w", id, err)
	}
	if ns, err := used.Int64(); err == nil {
		t := time.Unix(0, ns).UTC()
		c.LastUsedAt = &t
	}
	return &c, nil
}

// Credentials implements auth.Store; an empty firm lists every firm's.
func (s *Store) Credentials(ctx context.Context, firm string) ([]*auth.Credential, error) {
	set := keyAllCreds
	if firm != "" {
		set = keyFirmCreds + firm
	}
	ctx2, cancel := s.lookup(ctx)
	ids, err := s.rdb.SMembers(ctx2, set).Result()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("listing credentials in redis: %w", err)
	}
	out := make([]*auth.Credential, 0, len(ids))
	for _, id := range ids {
		c, err := s.Credential(ctx, id)
		if errors.Is(err, auth.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// touchScript keeps the latest last-used time when instances race.
var touchScript = goredis.NewScript(`
for i, id in ipairs(KEYS) do
  local cur = tonumber(redis.call('HGET', 'pgw:cred:lastused', id) or '0')
  if tonumber(ARGV[i]) > cur then redis.call('HSET', 'pgw:cred:lastused', id, ARGV[i]) end
end
return 0`)

// TouchCredentials implements auth.Store.
func (s *Store) TouchCredentials(ctx context.Context, lastUsed map[string]time.Time) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	keys := make([]string, 0, len(lastUsed))
	args := make([]any, 0, len(lastUsed))
	for id, at := range lastUsed {
		keys = append(keys, id)
		args = append(args, strconv.FormatInt(at.UnixNano(), 10))
	}
	if err := touchScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("recording last use in redis: %w", err)
	}
	return nil
}

// Revoked implements auth.RevocationFeed.
func (s *Store) Revoked(ctx context.Context, since time.Time) ([]string, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	ids, err := s.rdb.ZRangeByScore(ctx, keyRevocations, &goredis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("reading revocations from redis: %w", err)
	}
	return ids, nil
}

// SigningKey returns the generated signing key every instance shares,
// creating it the first time.
func (s *Store) SigningKey(ctx context.Context) (auth.SigningKey, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	secret := make([]byte, 32)
	rand.Read(secret)
	fresh, _ := json.Marshal(map[string]any{"id": "generated-" + time.Now().UTC().Format("20060102"), "secret": secret})
	if err := s.rdb.SetNX(ctx, keySigningKey, fresh, 0).Err(); err != nil {
		return auth.SigningKey{}, fmt.Errorf("storing signing key in redis: %w", err)
	}
	raw, err := s.rdb.Get(ctx, keySigningKey).Bytes()
	if err != nil {
		return auth.SigningKey{}, fmt.Errorf("reading signing key from redis: %w", err)
	}
	var k struct {
		ID     string `json:"id"`
		Secret []byte `json:"secret"`
	}
	if err := json.Unmarshal(raw, &k); err != nil {
		return auth.SigningKey{}, fmt.Errorf("decoding signing key: %w", err)
	}
	return auth.SigningKey{ID: k.ID, Secret: k.Secret}, nil
}

var (
	_ auth.Store          = (*Store)(nil)
	_ auth.RevocationFeed = (*Store)(nil)
)
