package ratelimit

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/redistest"
)

// BenchmarkAllow measures one decision, in process and through Redis (one
// EVALSHA on loopback, pipelined with concurrent callers'), for one busy
// credential and for many.
func BenchmarkAllow(b *testing.B) {
	rate := Rate{Limit: 1_000_000, Window: time.Second}
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "crd_" + strconv.Itoa(i)
	}
	run := func(b *testing.B, l *Limiter) {
		ctx := context.Background()
		b.Run("one-credential", func(b *testing.B) {
			for b.Loop() {
				l.Allow(ctx, "crd_bench", rate)
			}
		})
		parallel := func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					l.Allow(ctx, ids[i%len(ids)], rate)
					i++
				}
			})
		}
		b.Run("many-credentials-parallel", parallel)
		// As many callers as bench/ratelimit.sh has connections: with
		// Redis, their calls share batches.
		b.Run("many-credentials-32-callers", func(b *testing.B) {
			b.SetParallelism(max(32/runtime.GOMAXPROCS(0), 1))
			parallel(b)
		})
	}
	b.Run("local", func(b *testing.B) {
		l, err := New(Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		l, err := New(Config{Redis: srv.URL()})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
		if l.Allow(context.Background(), "crd_bench", rate).Fallback {
			b.Fatal("the Redis benchmark measured the fallback")
		}
	})
}
