package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Budget keeps budgets in Redis so that every gateway instance calling
// a vendor account draws from one allowance: ten instances each allowing
// Karbon's 120 requests a minute would otherwise send 1,200. The step runs
// in one Lua script on Redis's own clock, so instances with skewed clocks
// agree.
type Budget struct {
	rdb    goredis.Scripter
	prefix string
}

// NewBudget keeps budgets under keys "<prefix><key>" (prefix default
// "practicegw:upstream:budget:").
func NewBudget(rdb goredis.Scripter, prefix string) *Budget {
	if prefix == "" {
		prefix = "practicegw:upstream:budget:"
	}
	return &Budget{rdb: rdb, prefix: prefix}
}

// budgetScript is GCRA (internal/gcra) in Lua, in microseconds, at ARGV[3]
// or, when that is 0, on Redis's clock. It returns the wait, 0 when the
// request was booked. TestBudgetScriptMatchesGCRA keeps it in step with Go.
var budgetScript = goredis.NewScript(`
local interval = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nxt = tat + interval
local wait = nxt - now - per
if wait > 0 then return wait end
redis.call('SET', KEYS[1], nxt, 'PX', math.ceil((nxt - now) / 1000) + 1000)
return 0
`)

func (b *Budget) Take(ctx context.Context, key string, limit int, per time.Duration) (time.Duration, error) {
	return b.take(ctx, key, limit, per, 0)
}

// take runs the script at now (microseconds since the epoch), or on
// Redis's clock when now is 0; tests pin it to compare with internal/gcra.
func (b *Budget) take(ctx context.Context, key string, limit int, per time.Duration, now int64) (time.Duration, error) {
	interval := per / time.Duration(max(limit, 1))
	wait, err := budgetScript.Run(ctx, b.rdb, []string{b.prefix + key},
		interval.Microseconds(), per.Microseconds(), now).Int64()
	if err != nil {
		return 0, fmt.Errorf("redis budget %s: %w", key, err)
	}
	return time.Duration(wait) * time.Microsecond, nil
}
