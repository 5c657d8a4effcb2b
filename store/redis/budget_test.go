package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/internal/redistest"
	redisstore "github.com/practicegw/practicegw/store/redis"
	"github.com/practicegw/practicegw/store/storetest"
)

// Two instances' clients on one Redis. Time is Redis's own clock, so it
// passes for real.
func TestBudgetConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Budget(t, func(t *testing.T) (upstream.Budget, upstream.Budget, func(time.Duration)) {
		budget := func() *redisstore.Budget {
			rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Close() })
			if err := rdb.FlushDB(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			return redisstore.NewBudget(rdb, "t:")
		}
		a := budget()
		return a, budget(), time.Sleep
	})
}
