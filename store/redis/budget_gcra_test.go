package redis

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/gcra"
	"github.com/practicegw/practicegw/internal/redistest"
)

// TestBudgetScriptMatchesGCRA runs one random sequence of takes through the
// budget's Lua and internal/gcra on the same pinned clock: they must agree
// on every wait, or a vendor allowance would depend on the backend.
func TestBudgetScriptMatchesGCRA(t *testing.T) {
	srv := redistest.Start(t)
	rdb, err := NewClient(srv.URL(), TLSFiles{}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	b := NewBudget(rdb, "eq:")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 5))
	for _, r := range []struct {
		limit int
		per   time.Duration
	}{{4, time.Minute}, {7, time.Second}, {120, time.Minute}, {1, time.Second}} {
		c := gcra.Cell{Interval: (r.per / time.Duration(r.limit)).Microseconds(), Tolerance: r.per.Microseconds()}
		key := r.per.String() + "/" + time.Duration(r.limit).String()
		now, tat := time.Now().UnixMicro(), int64(0)
		for step := range 300 {
			if rng.IntN(2) == 0 {
				now += rng.Int64N(2 * c.Interval)
			}
			var want gcra.Result
			tat, want = c.Step(tat, now)
			got, err := b.take(ctx, key, r.limit, r.per, now)
			if err != nil {
				t.Fatal(err)
			}
			if got != time.Duration(want.RetryAfter)*time.Microsecond {
				t.Fatalf("%d per %v, step %d: script waits %v, Go %v", r.limit, r.per, step, got, time.Duration(want.RetryAfter)*time.Microsecond)
			}
		}
	}
}
