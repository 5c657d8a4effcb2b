package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/practice/readmodel"
)

// The live gateway instances that share the read models, each with where
// it is reached, its bound and the firms it holds (practice/readmodel's
// placement):
//
//	pgw:rm:{members}         hash: instance id -> its readmodel.Member as JSON
//	pgw:rm:{members}:alive   sorted set: instance id -> its heartbeat's expiry
//
// An instance renews its heartbeat every second or so; one that stops
// renewing (killed) drops out when its expiry passes, by Redis's clock
// (TIME), so the instances' own clocks need not agree. No service beyond
// Redis keeps the membership. The keys share a hash tag, for the scripts
// that write both on Redis Cluster.
const (
	keyMembers = "pgw:rm:{members}"
	keyAlive   = "pgw:rm:{members}:alive"
)

// heartbeatScript writes one member and drops those expired.
// KEYS[1] members, KEYS[2] alive; ARGV[1] id, ARGV[2] its JSON without
// until, ARGV[3] ttl in milliseconds. Returns the expiry written.
var heartbeatScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(dead) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
local untilMs = now + tonumber(ARGV[3])
local m = cjson.decode(ARGV[2])
m['until'] = untilMs
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(m))
redis.call('ZADD', KEYS[2], untilMs, ARGV[1])
return untilMs
`)

// membersScript returns the live members' JSON, dropping the expired.
var membersScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(dead) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return redis.call('HVALS', KEYS[1])
`)

// Heartbeat says that m is alive for ttl, with what it holds now.
func (r *ReadModel) Heartbeat(ctx context.Context, m readmodel.Member, ttl time.Duration) error {
	m.Until = 0
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	cctx, cancel := r.s.ctx(ctx)
	defer cancel()
	if err := heartbeatScript.Run(cctx, r.s.rdb, []string{keyMembers, keyAlive}, m.ID, b, ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("read model membership: %w", err)
	}
	return nil
}

// Members are the live instances.
func (r *ReadModel) Members(ctx context.Context) ([]readmodel.Member, error) {
	cctx, cancel := r.s.ctx(ctx)
	defer cancel()
	vals, err := membersScript.Run(cctx, r.s.rdb, []string{keyMembers, keyAlive}).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("read model membership: %w", err)
	}
	out := make([]readmodel.Member, 0, len(vals))
	for _, v := range vals {
		var m readmodel.Member
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			// A member written by another version, read as far as it
			// goes: it still counts as alive.
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// Leave takes id out of the membership at once, as a stopping instance
// does, so that the others take its firms without waiting for its
// heartbeat to expire.
func (r *ReadModel) Leave(ctx context.Context, id string) error {
	cctx, cancel := r.s.ctx(ctx)
	defer cancel()
	_, err := r.s.rdb.TxPipelined(cctx, func(p goredis.Pipeliner) error {
		p.HDel(cctx, keyMembers, id)
		p.ZRem(cctx, keyAlive, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read model membership: %w", err)
	}
	return nil
}
