package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// Tombstones of records removed from firms' read models, shared by every
// instance:
//
//	pgw:rm:{<firm>}:tomb:<kind>     hash: record id -> its tombstone's JSON
//	pgw:rm:{<firm>}:tombid:<kind>   sorted set, every score 0: the ids, in id order
//	pgw:rm:{<firm>}:tombat:<kind>   sorted set: the ids by deleted_at (Unix ms)
//
// The ids' set pages tombstones in id order (ZRANGEBYLEX), as records are
// paged; the times' set finds what the retention sweep removes. The three
// share the firm's hash tag, so one transaction writes them on Redis
// Cluster too.
type Tombstones struct{ s *Store }

// Tombstones returns the store's tombstones of removed records.
func (s *Store) Tombstones() *Tombstones { return &Tombstones{s: s} }

// tombstoneKeys are a kind's hash, ids' set and times' set.
func tombstoneKeys(firm string, k practice.Kind) []string {
	base := keyReadModel + "{" + firm + "}:"
	return []string{base + "tomb:" + string(k), base + "tombid:" + string(k), base + "tombat:" + string(k)}
}

// PutTombstones implements readmodel.TombstoneStore.
func (ts *Tombstones) PutTombstones(ctx context.Context, firm string, k practice.Kind, tombs []practice.Tombstone) error {
	if len(tombs) == 0 {
		return nil
	}
	keys := tombstoneKeys(firm, k)
	ctx, cancel := ts.s.ctx(ctx)
	defer cancel()
	_, err := ts.s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for _, t := range tombs {
			v, err := json.Marshal(t)
			if err != nil {
				return err
			}
			p.HSet(ctx, keys[0], t.ID, v)
			p.ZAdd(ctx, keys[1], goredis.Z{Member: t.ID})
			p.ZAdd(ctx, keys[2], goredis.Z{Score: float64(t.DeletedAt.UnixMilli()), Member: t.ID})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("keeping %s's %s tombstones in redis: %w", firm, k, err)
	}
	return nil
}

// DropTombstones implements readmodel.TombstoneStore.
func (ts *Tombstones) DropTombstones(ctx context.Context, firm string, k practice.Kind, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	keys := tombstoneKeys(firm, k)
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	ctx, cancel := ts.s.ctx(ctx)
	defer cancel()
	_, err := ts.s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HDel(ctx, keys[0], ids...)
		p.ZRem(ctx, keys[1], members...)
		p.ZRem(ctx, keys[2], members...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dropping %s's %s tombstones in redis: %w", firm, k, err)
	}
	return nil
}

// Tombstones implements readmodel.TombstoneStore: ids a page at a time
// from the ids' set, their tombstones from the hash, skipping those
// deleted before q.Since and those dropped in between.
func (ts *Tombstones) Tombstones(ctx context.Context, firm string, k practice.Kind, q practice.TombstoneQuery) ([]practice.Tombstone, error) {
	keys := tombstoneKeys(firm, k)
	ctx, cancel := ts.s.ctx(ctx)
	defer cancel()
	var out []practice.Tombstone
	after := q.After
	for len(out) < q.Limit {
		min := "-"
		if after != "" {
			min = "(" + after
		}
		batch := int64(max(q.Limit-len(out), 64))
		ids, err := ts.s.rdb.ZRangeByLex(ctx, keys[1], &goredis.ZRangeBy{Min: min, Max: "+", Count: batch}).Result()
		if err != nil {
			return nil, fmt.Errorf("listing %s's %s tombstones in redis: %w", firm, k, err)
		}
		if len(ids) == 0 {
			break
		}
		vals, err := ts.s.rdb.HMGet(ctx, keys[0], ids...).Result()
		if err != nil {
			return nil, fmt.Errorf("reading %s's %s tombstones in redis: %w", firm, k, err)
		}
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue
			}
			var t practice.Tombstone
			if err := json.Unmarshal([]byte(s), &t); err != nil {
				return nil, fmt.Errorf("tombstone %s of %s in redis: %w", ids[i], firm, err)
			}
			if !t.DeletedAt.Before(q.Since) && len(out) < q.Limit {
				out = append(out, t)
			}
		}
		if int64(len(ids)) < batch {
			break
		}
		after = ids[len(ids)-1]
	}
	return out, nil
}

// sweepTombstonesScript removes a kind's tombstones deleted before
// ARGV[1] (Unix ms), at most ARGV[2] of them, from the hash and both sets
// in one step, so that a tombstone put again meanwhile, with a newer time,
// is not removed, and a mass removal does not hold Redis for long.
var sweepTombstonesScript = goredis.NewScript(`
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(old) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
return #old`)

// sweepBatch is how many tombstones one sweep step removes at most.
const sweepBatch = 1000

// SweepTombstones removes the firm's tombstones deleted before before and
// returns how many it removed.
func (ts *Tombstones) SweepTombstones(ctx context.Context, firm string, before time.Time) (int, error) {
	ctx, cancel := ts.s.ctx(ctx)
	defer cancel()
	n := 0
	for _, k := range practice.Kinds {
		for {
			removed, err := sweepTombstonesScript.Run(ctx, ts.s.rdb, tombstoneKeys(firm, k),
				strconv.FormatInt(before.UnixMilli(), 10), sweepBatch).Int()
			if err != nil {
				return n, fmt.Errorf("sweeping %s's %s tombstones in redis: %w", firm, k, err)
			}
			n += removed
			if removed < sweepBatch {
				break
			}
		}
	}
	return n, nil
}

var _ readmodel.TombstoneStore = (*Tombstones)(nil)
