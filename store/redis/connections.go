package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/store/connection"
)

// Firms' connections and the consents awaited (store/connection):
//
//	pgw:{connect}:connections     hash: connection id -> its JSON
//	pgw:{connect}:firm:<firm>     set: the firm's connection ids
//	pgw:{connect}:auth:<digest>   a consent, under the SHA-256 of its state
//	                              (hex), its verifier sealed, and once
//	                              started the SHA-256 of the browser's
//	                              value; TTL: until it expires
//	pgw:{connect}:start:<digest>  its start link, under the SHA-256 of the
//	                              token, the state sealed; the same TTL
//
// Every instance lists every connection twice a second to follow the
// others' changes, and there are hundreds at most: one HGETALL. The
// connections' keys share the hash tag {connect}, so that the script
// creating one writes its hash and its firm's set on Redis Cluster too.
// Connections are never deleted (a disconnected one stays, for the firm
// to see) and never change firm, so a firm's set only grows with its
// connections. A consent is kept under its state's digest, and its start
// link under its token's, so that neither the state, the token, the
// browser's value nor the verifier is in Redis to be read.
const (
	keyConnections    = "pgw:{connect}:connections"
	keyFirmConnection = "pgw:{connect}:firm:"
	keyAuthorization  = "pgw:{connect}:auth:"
	keyConsentStart   = "pgw:{connect}:start:"
)

func authorizationKey(state string) string { return keyAuthorization + connection.StateDigest(state) }

func startKey(token string) string { return keyConsentStart + connection.StateDigest(token) }

// bindAuthorizationScript binds the consent KEYS[1] to the browser digest
// ARGV[1], its TTL kept, and answers it as it was: nil when it is gone or
// bound already (a consent is started once).
var bindAuthorizationScript = goredis.NewScript(`
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
local ok, rec = pcall(cjson.decode, raw)
if not ok or rec.browser then return false end
rec.browser = ARGV[1]
redis.call('SET', KEYS[1], cjson.encode(rec), 'KEEPTTL')
return raw`)

// takeAuthorizationScript deletes the consent KEYS[1] and answers it if
// the browser digest ARGV[1] started it: {1, consent}; {2} when another
// browser (or none) did, leaving it; {0} when it is gone.
var takeAuthorizationScript = goredis.NewScript(`
local raw = redis.call('GET', KEYS[1])
if not raw then return {0} end
local ok, rec = pcall(cjson.decode, raw)
if not ok or ARGV[1] == '' or rec.browser ~= ARGV[1] then return {2} end
redis.call('DEL', KEYS[1])
return {1, raw}`)

// createConnectionScript stores the connection ARGV[2] under id ARGV[1]
// unless the id is taken, and adds it to its firm's set: 0 when taken.
var createConnectionScript = goredis.NewScript(`
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
return 1`)

// updateConnectionScript writes the connection ARGV[4] over id ARGV[1]
// if the stored one's version is still ARGV[2] and its firm ARGV[3].
var updateConnectionScript = goredis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 'notfound' end
local c = cjson.decode(cur)
if c.version ~= tonumber(ARGV[2]) then return 'version' end
if c.firm ~= ARGV[3] then return 'moved' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
return 'ok'`)

// CreateConnection stores a new connection as version 1.
func (s *Store) CreateConnection(ctx context.Context, c connection.Connection) (connection.Connection, error) {
	if c.ID == "" {
		return connection.Connection{}, errors.New("create connection: no id")
	}
	c.Version = 1
	v, err := json.Marshal(c)
	if err != nil {
		return connection.Connection{}, fmt.Errorf("create connection %s: %w", c.ID, err)
	}
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	created, err := createConnectionScript.Run(ctx, s.rdb, []string{keyConnections, keyFirmConnection + c.Firm}, c.ID, v).Int()
	if err != nil {
		return connection.Connection{}, fmt.Errorf("create connection %s in redis: %w", c.ID, err)
	}
	if created == 0 {
		return connection.Connection{}, fmt.Errorf("create connection %s: %w", c.ID, connection.ErrExists)
	}
	return c, nil
}

// Connection returns the connection with id.
func (s *Store) Connection(ctx context.Context, id string) (connection.Connection, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	raw, err := s.rdb.HGet(ctx, keyConnections, id).Bytes()
	if isNil(err) {
		return connection.Connection{}, fmt.Errorf("connection %s: %w", id, connection.ErrNotFound)
	}
	if err != nil {
		return connection.Connection{}, fmt.Errorf("connection %s in redis: %w", id, err)
	}
	return decodeConnection(id, raw)
}

// Connections lists a firm's connections, or every firm's when firm is
// "", oldest first (by creation, then id).
func (s *Store) Connections(ctx context.Context, firm string) ([]connection.Connection, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	raws, err := s.connectionValues(ctx, firm)
	if err != nil {
		return nil, fmt.Errorf("connections of %q in redis: %w", firm, err)
	}
	out := make([]connection.Connection, 0, len(raws))
	for id, raw := range raws {
		c, err := decodeConnection(id, []byte(raw))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b connection.Connection) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// connectionValues is the stored JSON of firm's connections (every
// firm's when ""), by id.
func (s *Store) connectionValues(ctx context.Context, firm string) (map[string]string, error) {
	if firm == "" {
		return s.rdb.HGetAll(ctx, keyConnections).Result()
	}
	ids, err := s.rdb.SMembers(ctx, keyFirmConnection+firm).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	vals, err := s.rdb.HMGet(ctx, keyConnections, ids...).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ids))
	for i, v := range vals {
		if raw, ok := v.(string); ok {
			out[ids[i]] = raw
		}
	}
	return out, nil
}

// UpdateConnection writes c if the stored version is still version, as
// version+1, in one script. A connection stays its firm's: a write that
// moves it is refused.
func (s *Store) UpdateConnection(ctx context.Context, c connection.Connection, version int64) (connection.Connection, error) {
	c.Version = version + 1
	v, err := json.Marshal(c)
	if err != nil {
		return connection.Connection{}, fmt.Errorf("update connection %s: %w", c.ID, err)
	}
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	res, err := updateConnectionScript.Run(ctx, s.rdb, []string{keyConnections}, c.ID, strconv.FormatInt(version, 10), c.Firm, v).Text()
	if err != nil {
		return connection.Connection{}, fmt.Errorf("update connection %s in redis: %w", c.ID, err)
	}
	switch res {
	case "ok":
		return c, nil
	case "notfound":
		err = connection.ErrNotFound
	case "version":
		err = connection.ErrVersion
	case "moved":
		err = fmt.Errorf("a connection cannot move to firm %s", c.Firm)
	default:
		err = fmt.Errorf("unexpected script answer %q", res)
	}
	return connection.Connection{}, fmt.Errorf("update connection %s: %w", c.ID, err)
}

func decodeConnection(id string, raw []byte) (connection.Connection, error) {
	var c connection.Connection
	if err := json.Unmarshal(raw, &c); err != nil {
		return connection.Connection{}, fmt.Errorf("decode connection %s: %w", id, err)
	}
	return c, nil
}

// SaveAuthorization keeps a and its start link until a.Expires: Redis
// drops them then. One already expired is not kept.
func (s *Store) SaveAuthorization(ctx context.Context, a connection.Authorization) error {
	ttl := time.Until(a.Expires).Truncate(time.Millisecond)
	if ttl <= 0 {
		return nil
	}
	v, err := connection.SealAuthorization(s.secrets, a)
	if err != nil {
		return err
	}
	start, err := connection.SealStart(s.secrets, a)
	if err != nil {
		return err
	}
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	_, err = s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, authorizationKey(a.OAuthState), v, ttl)
		p.Set(ctx, startKey(a.Start), start, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("save authorization of connection %s in redis: %w", a.Connection, err)
	}
	return nil
}

// StartAuthorization takes the start link of token with one GETDEL, so
// that of instances racing on one link one gets it, then binds its
// consent to browser. Should the process stop between the two, the link
// is spent and its consent bound to no browser: the administrator asks
// for a new link, as after any lost one.
func (s *Store) StartAuthorization(ctx context.Context, token, browser string, now time.Time) (connection.Authorization, error) {
	cctx, cancel := s.lookup(ctx)
	defer cancel()
	raw, err := s.rdb.GetDel(cctx, startKey(token)).Bytes()
	if isNil(err) {
		return connection.Authorization{}, connection.ErrNotFound
	}
	if err != nil {
		return connection.Authorization{}, fmt.Errorf("start authorization in redis: %w", err)
	}
	state, err := connection.OpenStart(s.secrets, token, raw, now)
	if err != nil {
		return connection.Authorization{}, err
	}
	rec, err := bindAuthorizationScript.Run(cctx, s.rdb, []string{authorizationKey(state)}, connection.StateDigest(browser)).Text()
	if isNil(err) {
		return connection.Authorization{}, connection.ErrNotFound
	}
	if err != nil {
		return connection.Authorization{}, fmt.Errorf("start authorization in redis: %w", err)
	}
	return connection.OpenAuthorization(s.secrets, state, []byte(rec), now)
}

// TakeAuthorization returns the consent of state and deletes it in one
// script, so that of instances racing on one state one gets it, if
// browser started it; one another browser started is left as it was. One
// expired at now is deleted and not returned (now may run ahead of the
// TTL's clock).
func (s *Store) TakeAuthorization(ctx context.Context, state, browser string, now time.Time) (connection.Authorization, error) {
	cctx, cancel := s.lookup(ctx)
	defer cancel()
	digest := ""
	if browser != "" {
		digest = connection.StateDigest(browser)
	}
	res, err := takeAuthorizationScript.Run(cctx, s.rdb, []string{authorizationKey(state)}, digest).Slice()
	if err != nil {
		return connection.Authorization{}, fmt.Errorf("take authorization in redis: %w", err)
	}
	switch {
	case len(res) == 1 && res[0] == int64(0):
		return connection.Authorization{}, connection.ErrNotFound
	case len(res) == 1 && res[0] == int64(2):
		return connection.Authorization{}, connection.ErrOtherBrowser
	case len(res) == 2 && res[0] == int64(1):
		raw, ok := res[1].(string)
		if ok {
			return connection.OpenAuthorization(s.secrets, state, []byte(raw), now)
		}
	}
	return connection.Authorization{}, fmt.Errorf("take authorization in redis: unexpected script answer %v", res)
}
