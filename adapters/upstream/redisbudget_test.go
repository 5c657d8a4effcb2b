package upstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/internal/redistest"
)

func TestRedisBudgetIsShared(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	a, b := upstream.NewRedisBudget(rdb, "t:"), upstream.NewRedisBudget(rdb, "t:")
	ctx := context.Background()
	for i := range 4 {
		budget := a
		if i%2 == 1 {
			budget = b
		}
		wait, err := budget.Take(ctx, "karbon:acct", 4, time.Minute)
		if err != nil || wait != 0 {
			t.Fatalf("take %d: wait %v, err %v", i, wait, err)
		}
	}
	wait, err := b.Take(ctx, "karbon:acct", 4, time.Minute)
	if err != nil || wait < 14*time.Second || wait > 15*time.Second {
		t.Fatalf("fifth take: wait %v, err %v; want about 15s", wait, err)
	}
	if wait, _ := a.Take(ctx, "karbon:other", 4, time.Minute); wait != 0 {
		t.Fatal("budgets of two accounts are shared")
	}
}
