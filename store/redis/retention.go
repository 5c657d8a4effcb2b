package redis

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
)

// Prune takes one step of removing what is older than r.Before, in one
// script that looks at no more than r.Max records. It walks log:dlv, every
// delivery id in order (their event's time order), then log:evt, every
// event in id order (occurred_at order), so a step reads only old entries
// and the rest of Redis waits for no more than one step.
func (s *Store) Prune(ctx context.Context, r dispatcher.PruneRequest) (dispatcher.PruneResult, error) {
	if err := s.indexLog(ctx); err != nil {
		return dispatcher.PruneResult{}, fmt.Errorf("prune webhook log: %w", err)
	}
	floor := dispatcher.EventIDFloor(r.Before)
	res, err := s.run(ctx, s.scripts.prune, timeHex(r.Before), "dlv_"+floor[len("evt_"):], floor, max(r.Max, 1), r.Cursor)
	if err != nil {
		return dispatcher.PruneResult{}, fmt.Errorf("prune webhook log: %w", err)
	}
	arr, _ := res.([]any)
	if len(arr) != 3 {
		return dispatcher.PruneResult{}, fmt.Errorf("prune webhook log: unexpected answer %v", res)
	}
	deliveries, _ := arr[0].(int64)
	events, _ := arr[1].(int64)
	next, _ := arr[2].(string)
	return dispatcher.PruneResult{Events: int(events), Deliveries: int(deliveries), Next: next}, nil
}

// indexLog fills log:dlv and log:evt from what a store written before they
// existed holds, once: the scripts keep them from then on. Several
// processes doing it at once add the same members.
func (s *Store) indexLog(ctx context.Context) error {
	if s.indexed.Load() {
		return nil
	}
	done := s.key("log:indexed")
	cctx, cancel := s.ctx(ctx)
	n, err := s.rdb.Exists(cctx, done).Result()
	cancel()
	if err != nil {
		return err
	}
	if n == 0 {
		if err := s.scanKeys(ctx, "dlv:", func(keys []string) error {
			ids := make([]goredis.Z, len(keys))
			for i, k := range keys {
				ids[i] = goredis.Z{Member: strings.TrimPrefix(k, s.key("dlv:"))}
			}
			return s.zadd(ctx, "log:dlv", ids)
		}); err != nil {
			return fmt.Errorf("index deliveries: %w", err)
		}
		if err := s.scanKeys(ctx, "evts:", func(keys []string) error {
			for _, k := range keys {
				if err := s.indexEvents(ctx, k, strings.TrimPrefix(k, s.key("evts:"))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("index events: %w", err)
		}
		cctx, cancel := s.ctx(ctx)
		err := s.rdb.Set(cctx, done, "1", 0).Err()
		cancel()
		if err != nil {
			return err
		}
	}
	s.indexed.Store(true)
	return nil
}

// indexEvents adds a tenant's events to log:evt, a chunk at a time.
func (s *Store) indexEvents(ctx context.Context, index, tenant string) error {
	const chunk = 1000
	for start := int64(0); ; start += chunk {
		cctx, cancel := s.ctx(ctx)
		members, err := s.rdb.ZRange(cctx, index, start, start+chunk-1).Result()
		cancel()
		if err != nil {
			return err
		}
		zs := make([]goredis.Z, 0, len(members))
		for _, m := range members {
			id, kind, _ := strings.Cut(m, " ")
			zs = append(zs, goredis.Z{Member: id + " " + tenant + " " + kind})
		}
		if err := s.zadd(ctx, "log:evt", zs); err != nil {
			return err
		}
		if len(members) < chunk {
			return nil
		}
	}
}

func (s *Store) zadd(ctx context.Context, key string, zs []goredis.Z) error {
	if len(zs) == 0 {
		return nil
	}
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	return s.rdb.ZAdd(cctx, s.key(key), zs...).Err()
}

// scanKeys calls fn with each page of the keys under the prefix and kind,
// asking the node that holds them (the prefix's hash tag puts them all on
// one).
func (s *Store) scanKeys(ctx context.Context, kind string, fn func([]string) error) error {
	var node goredis.Cmdable = s.rdb
	if c, ok := s.rdb.(*goredis.ClusterClient); ok {
		cctx, cancel := s.ctx(ctx)
		m, err := c.MasterForKey(cctx, s.key("backlog"))
		cancel()
		if err != nil {
			return err
		}
		node = m
	}
	match := globEscape(s.key(kind)) + "*"
	var cursor uint64
	for {
		cctx, cancel := s.ctx(ctx)
		keys, next, err := node.Scan(cctx, cursor, match, 1000).Result()
		cancel()
		if err != nil {
			return err
		}
		if err := fn(keys); err != nil {
			return err
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape quotes the characters SCAN's MATCH treats as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
