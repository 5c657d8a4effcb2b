package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
)

// The vendor notifications kept until what they name is read
// (adapters/kit/notifications.Inbox), per scope, the keys sharing the
// scope's hash tag for the scripts:
//
//	pgw:nb:{<scope>}:seen:<key>   a body kept in the last hour (PX)
//	pgw:nb:{<scope>}:seq          the scope's item counter
//	pgw:nb:{<scope>}:due          zset: item id -> when it is due (ms)
//	pgw:nb:{<scope>}:items        hash: item id -> "<kept at ms>:<item>"
//
// Item ids are the counter in 16 hex digits, so they sort as kept. Times
// are Redis's own (TIME), so the instances' clocks need not agree.
func notificationKeys(scope string) (prefix string) { return "pgw:nb:{" + scope + "}:" }

// keepNotificationScript keeps a body's items unless it was kept within
// the window. KEYS seen, seq, due, items; ARGV window ms, the items.
var keepNotificationScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return 0
end
for i = 2, #ARGV do
  local id = string.format('%016x', redis.call('INCR', KEYS[2]))
  redis.call('HSET', KEYS[4], id, now .. ':' .. ARGV[i])
  redis.call('ZADD', KEYS[3], now, id)
end
return 1
`)

// takeNotificationsScript takes up to n due items, due again after the
// lease, dropping those kept longer than the window ago. KEYS due, items;
// ARGV n, lease ms, window ms. Returns id, value pairs.
var takeNotificationsScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local untilMs = now + math.max(tonumber(ARGV[2]), 1)
local oldest = now - tonumber(ARGV[3])
local out = {}
while #out < 2 * n do
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, n)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local v = redis.call('HGET', KEYS[2], id)
    if not v then
      redis.call('ZREM', KEYS[1], id)
    elseif tonumber(string.sub(v, 1, string.find(v, ':', 1, true) - 1)) < oldest then
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[2], id)
    elseif #out < 2 * n then
      redis.call('ZADD', KEYS[1], untilMs, id)
      table.insert(out, id)
      table.insert(out, v)
    end
  end
end
return out
`)

// settleNotificationScript drops an item read, or makes it due after the
// retry. KEYS due, items; ARGV id, done (1 or 0), retry ms.
var settleNotificationScript = goredis.NewScript(`
if ARGV[2] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
return 1
`)

// KeepNotification keeps items under key in scope unless any instance
// kept key within the window.
func (s *Store) KeepNotification(ctx context.Context, scope, key string, items [][]byte) (bool, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	p := notificationKeys(scope)
	args := []any{notifications.Window.Milliseconds()}
	for _, it := range items {
		args = append(args, it)
	}
	kept, err := keepNotificationScript.Run(ctx, s.rdb, []string{p + "seen:" + key, p + "seq", p + "due", p + "items"}, args...).Int()
	return kept == 1, err
}

// TakeNotifications takes up to n of scope's due items, oldest first.
func (s *Store) TakeNotifications(ctx context.Context, scope string, n int, lease time.Duration) ([]notifications.Kept, error) {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	p := notificationKeys(scope)
	vals, err := takeNotificationsScript.Run(ctx, s.rdb, []string{p + "due", p + "items"},
		n, lease.Milliseconds(), notifications.Window.Milliseconds()).StringSlice()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []notifications.Kept
	for i := 0; i+1 < len(vals); i += 2 {
		at, item, _ := strings.Cut(vals[i+1], ":")
		ms, _ := strconv.ParseInt(at, 10, 64)
		out = append(out, notifications.Kept{ID: vals[i], Item: []byte(item), At: time.UnixMilli(ms)})
	}
	return out, nil
}

// SettleNotification drops a taken item read, or makes it due after
// retry.
func (s *Store) SettleNotification(ctx context.Context, scope, id string, done bool, retry time.Duration) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	p := notificationKeys(scope)
	flag := "0"
	if done {
		flag = "1"
	}
	return settleNotificationScript.Run(ctx, s.rdb, []string{p + "due", p + "items"}, id, flag, retry.Milliseconds()).Err()
}

var _ notifications.Inbox = (*Store)(nil)
