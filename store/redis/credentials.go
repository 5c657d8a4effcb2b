package redis

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/store/credential"
)

const (
	keyCredential  = "pgw:cred:"       // + id -> JSON
	keyFirmCreds   = "pgw:creds:firm:" // + firm -> set of ids
	keyAllCreds    = "pgw:creds"       // set of ids
	keyLastUsed    = "pgw:cred:lastused"
	keyRevocations = "pgw:cred:revoked" // zset id -> unix ms: every revoked credential
	// keyRevocationFeed is a stream with one entry per revocation, in the
	// order Redis applied them: instances follow it by entry id, which
	// Redis assigns, so no instance's clock decides what it reads.
	keyRevocationFeed = "pgw:cred:revocations"
	keySigningKey     = "pgw:signing_key"
	keyIdempotency    = "pgw:idem:"
)

// SaveCredential implements auth.Store.
func (s *Store) SaveCredential(ctx context.Context, c *credential.Credential) error {
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
			// Trimmed roughly to the newest entries: an instance that
			// falls further behind reads the set whole (ErrFeedGap).
			p.XAdd(ctx, &goredis.XAddArgs{Stream: keyRevocationFeed, MaxLen: revocationFeedLen, Approx: true,
				Values: []string{"id", c.ID}})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("saving credential in redis: %w", err)
	}
	return nil
}

// Credential implements auth.Store.
func (s *Store) Credential(ctx context.Context, id string) (*credential.Credential, error) {
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
		return nil, credential.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var c credential.Credential
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
func (s *Store) Credentials(ctx context.Context, firm string) ([]*credential.Credential, error) {
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
	out := make([]*credential.Credential, 0, len(ids))
	for _, id := range ids {
		c, err := s.Credential(ctx, id)
		if errors.Is(err, credential.ErrNotFound) {
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

// revocationFeedLen is about how many revocations the feed keeps; an
// instance follows it four times a second, so only one that was cut off
// for a long while finds its position gone.
const revocationFeedLen = 10_000

// maxFollow bounds one read of the feed; the next read carries on.
const maxFollow = 1000

// A position in the revocation feed is "<entry id>/<entries added>": the
// last entry read and how many entries the stream had ever been given up
// to it. The count tells a follower whether trimming took entries it has
// not read (Redis 7's XINFO STREAM reports entries-added).

// feedInfo reads the stream's newest id and count, as a position; an
// absent stream is the empty feed.
func feedInfo(cmd *goredis.XInfoStreamCmd) (string, int64, error) {
	if err := cmd.Err(); err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return "0-0/0", 0, nil
		}
		return "", 0, err
	}
	info := cmd.Val()
	return info.LastGeneratedID + "/" + strconv.FormatInt(info.EntriesAdded, 10), info.EntriesAdded - info.Length, nil
}

// Revocations implements auth.RevocationFeed: every revoked credential and
// the feed's position, read in one transaction, so that every revocation
// after the position is in the feed and every one before it in the set.
func (s *Store) Revocations(ctx context.Context) ([]string, string, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	var (
		info *goredis.XInfoStreamCmd
		set  *goredis.StringSliceCmd
	)
	s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		info = p.XInfoStream(ctx, keyRevocationFeed)
		set = p.ZRange(ctx, keyRevocations, 0, -1)
		return nil
	})
	pos, _, err := feedInfo(info)
	if err == nil {
		err = set.Err()
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading revocations from redis: %w", err)
	}
	return set.Val(), pos, nil
}

// RevokedAfter implements auth.RevocationFeed: up to maxFollow revocations
// after pos, read in one transaction with the stream's counts, which say
// whether trimming took entries after pos.
func (s *Store) RevokedAfter(ctx context.Context, pos string) ([]string, string, error) {
	id, n, err := parseFeedPos(pos)
	if err != nil {
		return nil, pos, fmt.Errorf("%w: %v", credential.ErrFeedGap, err)
	}
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	var (
		info  *goredis.XInfoStreamCmd
		after *goredis.XMessageSliceCmd
	)
	s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		info = p.XInfoStream(ctx, keyRevocationFeed)
		after = p.XRangeN(ctx, keyRevocationFeed, "("+id, "+", maxFollow)
		return nil
	})
	_, trimmed, err := feedInfo(info)
	if err == nil {
		err = after.Err()
	}
	if err != nil {
		return nil, pos, fmt.Errorf("following the revocation feed in redis: %w", err)
	}
	if n < trimmed {
		// Entries after pos were trimmed: only a whole read is safe.
		return nil, pos, credential.ErrFeedGap
	}
	var ids []string
	for _, m := range after.Val() {
		if v, ok := m.Values["id"].(string); ok {
			ids = append(ids, v)
		}
		id, n = m.ID, n+1
	}
	return ids, id + "/" + strconv.FormatInt(n, 10), nil
}

func parseFeedPos(pos string) (string, int64, error) {
	id, count, ok := strings.Cut(pos, "/")
	n, err := strconv.ParseInt(count, 10, 64)
	if !ok || err != nil || n < 0 || id == "" {
		return "", 0, fmt.Errorf("revocation feed position %q", pos)
	}
	return id, n, nil
}

// signingKeyRecord is how the generated signing key is kept: its id in
// clear (tokens name it), its secret sealed and bound to the id.
type signingKeyRecord struct {
	ID     string `json:"id"`
	Sealed string `json:"sealed,omitempty"`
	// Secret is where versions before sealing kept it in plain text: read,
	// never written.
	Secret []byte `json:"secret,omitempty"`
}

// SigningKey returns the generated signing key every instance shares,
// creating it the first time.
func (s *Store) SigningKey(ctx context.Context) (credential.SigningKey, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	secret := make([]byte, 32)
	rand.Read(secret)
	id := "generated-" + time.Now().UTC().Format("20060102")
	fresh, _ := json.Marshal(signingKeyRecord{ID: id, Sealed: string(s.secrets.Seal(secret, whatSigningKey(id)))})
	if err := s.rdb.SetNX(ctx, keySigningKey, fresh, 0).Err(); err != nil {
		return credential.SigningKey{}, fmt.Errorf("storing signing key in redis: %w", err)
	}
	raw, err := s.rdb.Get(ctx, keySigningKey).Bytes()
	if err != nil {
		return credential.SigningKey{}, fmt.Errorf("reading signing key from redis: %w", err)
	}
	return s.openSigningKey(ctx, raw)
}

// sealSigningKey seals the generated signing key if an earlier version
// stored it in plain text.
func (s *Store) sealSigningKey(ctx context.Context) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	raw, err := s.rdb.Get(ctx, keySigningKey).Bytes()
	if isNil(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading signing key from redis: %w", err)
	}
	_, err = s.openSigningKey(ctx, raw)
	return err
}

// openSigningKey reads the stored record raw, sealing it in place if an
// earlier version left it in plain text.
func (s *Store) openSigningKey(ctx context.Context, raw []byte) (credential.SigningKey, error) {
	var rec signingKeyRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return credential.SigningKey{}, fmt.Errorf("decoding signing key: %w", err)
	}
	if rec.Sealed == "" {
		sealedRec, _ := json.Marshal(signingKeyRecord{ID: rec.ID, Sealed: string(s.secrets.Seal(rec.Secret, whatSigningKey(rec.ID)))})
		// Changed meanwhile, it was sealed by another instance.
		if err := replaceScript.Run(ctx, s.rdb, []string{keySigningKey}, raw, sealedRec).Err(); err != nil {
			return credential.SigningKey{}, fmt.Errorf("sealing signing key in redis: %w", err)
		}
		return credential.SigningKey{ID: rec.ID, Secret: rec.Secret}, nil
	}
	secret, err := s.secrets.Open([]byte(rec.Sealed), whatSigningKey(rec.ID))
	if err != nil {
		return credential.SigningKey{}, fmt.Errorf("signing key %s: %w", rec.ID, err)
	}
	return credential.SigningKey{ID: rec.ID, Secret: secret}, nil
}
