package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/internal/gcra"
)

// Budget keeps budgets in Redis so that every gateway instance calling
// a vendor account draws from one allowance: ten instances each allowing
// Karbon's 120 requests a minute would otherwise send 1,200. The step runs
// in the rate limiter's Lua GCRA on Redis's own clock, so instances with
// skewed clocks agree.
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

func (b *Budget) Take(ctx context.Context, key string, limit int, per time.Duration) (time.Duration, error) {
	return b.take(ctx, key, limit, per, 0)
}

// take books one request in the rate limiter's script (lua/gcra.lua), in
// microseconds, without usage counting, at now (microseconds since the
// epoch) or on Redis's clock when now is 0; tests pin it to compare with
// internal/gcra. It returns the wait, 0 when the request was booked.
func (b *Budget) take(ctx context.Context, key string, limit int, per time.Duration, now int64) (time.Duration, error) {
	c := gcra.Cell{Interval: (per / time.Duration(max(limit, 1))).Microseconds(), Tolerance: per.Microseconds()}
	k := b.prefix + key
	// The script takes keys in pairs, the second for usage, which mode 2
	// leaves alone.
	reply, err := gcraScript.Run(ctx, b.rdb, []string{k, k},
		retentionArg, 1, c.Interval, c.Tolerance, modeBookNoCount, now, 1).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("redis budget %s: %w", key, err)
	}
	if len(reply) != 2 || reply[0] < 0 {
		return 0, fmt.Errorf("redis budget %s: script answered %v", key, reply)
	}
	if reply[1] == 1 {
		return 0, nil
	}
	// Refused: the wait until one more interval fits within the tolerance,
	// as gcra.Cell.Step's RetryAfter.
	wait := reply[0] + c.Interval - c.Tolerance
	return time.Duration(wait) * time.Microsecond, nil
}
