package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/store/usage"
)

func newRedisLimiter(t testing.TB, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if l.redis != nil {
		// The connection and the script are made ready before a test
		// counts decisions: on a loaded machine the first dial and
		// script load can outlast the limiter's timeout, which would hand
		// the first decisions to the fallback. Tests of an unreachable
		// Redis find it unreachable here too.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = l.redis.decide(ctx, "warm-up", tenPerSecond.cell(), false, time.Now().UnixMicro())
	}
	return l
}

// TestScriptMatchesStep runs the Lua script and the Go GCRA side by side on
// random sequences with the same pinned clock: the two must agree on every
// field of every decision, or instances with and without Redis would
// enforce different limits.
func TestScriptMatchesStep(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL()})
	ctx := context.Background()
	rates := []Rate{
		{Limit: 10, Window: time.Second},
		{Limit: 10, Window: time.Second, Burst: 3},
		{Limit: 7, Window: time.Second},
		{Limit: 7200, Window: time.Hour},
		{Limit: 100, Window: time.Minute, Burst: 1},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for i, rate := range rates {
		c := rate.cell()
		var local buckets
		id := fmt.Sprintf("crd_eq%d", i)
		now := time.Now().UnixMicro()
		for step := range 300 {
			if rng.IntN(2) == 0 {
				now += rng.Int64N(3 * c.Interval)
			}
			consume := rng.IntN(5) != 0
			want := local.decide(id, c, now, consume)
			got, err := l.redis.decide(ctx, id, c, consume, now)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("rate %v, step %d (consume %v): script %+v, Go %+v", rate, step, consume, got, want)
			}
		}
	}
}

func TestRedisRefusedRequestsCostNothing(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL()})
	ctx := context.Background()
	c := tenPerSecond.cell()
	now := time.Now().UnixMicro()
	for i := range 10 {
		if d, _ := l.redis.decide(ctx, "crd_a", c, true, now); !d.Allowed {
			t.Fatalf("request %d refused", i+1)
		}
	}
	for range 200 {
		d, _ := l.redis.decide(ctx, "crd_a", c, true, now)
		if d.Allowed || d.RetryAfter != 100*time.Millisecond {
			t.Fatalf("over the limit: %+v", d)
		}
	}
	if d, _ := l.redis.decide(ctx, "crd_a", c, true, now+100_000); !d.Allowed {
		t.Fatal("refused requests pushed the next slot back")
	}
}

// TestRedisBoundaryRealClock is the boundary on Redis's own clock.
func TestRedisBoundaryRealClock(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL()})
	ctx := context.Background()
	for i := range 10 {
		if d := l.Allow(ctx, "crd_a", tenPerSecond); !d.Allowed || d.Fallback {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	d := l.Allow(ctx, "crd_a", tenPerSecond)
	// A little of T has passed on Redis's clock since the first request.
	if d.Allowed || d.RetryAfter <= 50*time.Millisecond || d.RetryAfter > 100*time.Millisecond {
		t.Fatalf("11th: %+v, want refused with RetryAfter just under 100ms", d)
	}
	time.Sleep(d.RetryAfter)
	if d := l.Allow(ctx, "crd_a", tenPerSecond); !d.Allowed {
		t.Fatalf("after RetryAfter: %+v", d)
	}
	if d := l.Allow(ctx, "crd_a", tenPerSecond); d.Allowed {
		t.Fatalf("one more after RetryAfter: %+v", d)
	}
}

func TestRedisUsageForAWeek(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL()})
	ctx := context.Background()
	c := Rate{Limit: 3, Window: time.Hour}.cell()
	start := time.Date(2026, 3, 1, 0, 30, 0, 0, time.UTC)

	// Nine days, one to four requests an hour, three of them allowed.
	var want []usage.Hour
	now := start
	for h := range 9 * 24 {
		u := usage.Hour{Hour: now.Truncate(time.Hour)}
		for range h%5 + 1 {
			d, err := l.redis.decide(ctx, "crd_a", c, true, now.UnixMicro())
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				u.Admitted++
			} else {
				u.Refused++
			}
		}
		want = append(want, u)
		now = now.Add(time.Hour)
	}
	weekAgo := now.Add(-7 * 24 * time.Hour)
	got, err := l.Usage(ctx, "crd_a", weekAgo)
	if err != nil {
		t.Fatal(err)
	}
	assertUsage(t, got, want[len(want)-7*24:])

	// The hash holds eight days and the marker, not all nine.
	fields, err := l.redis.client.HKeys(ctx, "pgw:usage:{crd_a}").Result()
	if err != nil {
		t.Fatal(err)
	}
	oldest := now.Add(-time.Hour).Unix()/3600 - retentionHours
	for _, f := range fields {
		var h int64
		if _, err := fmt.Sscanf(f, "%d:", &h); err == nil && h < oldest {
			t.Fatalf("field %s is past retention", f)
		}
	}
	if ttl := l.redis.client.PTTL(ctx, "pgw:usage:{crd_a}").Val(); ttl <= 7*24*time.Hour {
		t.Fatalf("usage key TTL %v, want about 8 days", ttl)
	}
}

// TestTwoInstancesShareOneBucket hammers one credential through two
// Limiters, as two gateway instances would, on one Redis.
func TestTwoInstancesShareOneBucket(t *testing.T) {
	srv := redistest.Start(t)
	a := newRedisLimiter(t, Config{Redis: srv.URL()})
	b := newRedisLimiter(t, Config{Redis: srv.URL()})
	rate := Rate{Limit: 30, Window: time.Minute} // T = 2s: no refill during the test
	ctx := context.Background()

	var admitted, refused, fellBack atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := range 16 {
		l := a
		if g%2 == 1 {
			l = b
		}
		wg.Go(func() {
			for range 40 {
				d := l.Allow(ctx, "crd_shared", rate)
				switch {
				case d.Fallback:
					fellBack.Add(1)
				case d.Allowed:
					admitted.Add(1)
				default:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if fellBack.Load() != 0 {
		t.Fatalf("%d decisions fell back with Redis up", fellBack.Load())
	}
	// 30 at once, plus one per 2s that passed.
	most := 30 + int64(elapsed/(2*time.Second)) + 1
	if n := admitted.Load(); n < 30 || n > most {
		t.Fatalf("admitted %d of 640 in %v, want 30..%d", n, elapsed, most)
	}
	t.Logf("two instances: %d admitted, %d refused in %v", admitted.Load(), refused.Load(), elapsed)
}

// TestRedisKilledAndRestarted kills Redis under load: every request must
// still be answered within about the timeout by the fallback, one warning
// must be logged, decisions must return to Redis soon after it is back,
// and the usage counted meanwhile must reach Redis.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	core, logs := observer.New(zap.InfoLevel)
	const timeout = 50 * time.Millisecond
	l := newRedisLimiter(t, Config{Redis: srv.URL(), Timeout: timeout, FlushInterval: 100 * time.Millisecond, Logger: zap.New(core)})
	ctx := context.Background()
	rate := Rate{Limit: 100000, Window: time.Second}

	var stop atomic.Bool
	var slowest atomic.Int64
	var total, fellBack atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				start := time.Now()
				d := l.Allow(ctx, "crd_load", rate)
				took := time.Since(start)
				for cur := slowest.Load(); int64(took) > cur && !slowest.CompareAndSwap(cur, int64(took)); cur = slowest.Load() {
				}
				total.Add(1)
				if d.Fallback {
					fellBack.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(150 * time.Millisecond)
	srv.Kill()
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	if fellBack.Load() == 0 {
		t.Fatal("no decision fell back after Redis was killed")
	}
	if s := time.Duration(slowest.Load()); s > timeout+50*time.Millisecond {
		t.Fatalf("slowest decision took %v, want at most about the %v timeout", s, timeout)
	}
	if n := logs.FilterLevelExact(zap.WarnLevel).Len(); n != 1 {
		t.Fatalf("%d warnings logged for one outage, want 1: %v", n, logs.All())
	}

	restarted := time.Now()
	srv.Restart()
	eventually.True(t, 2*time.Second-time.Since(restarted), 5*time.Millisecond, "decisions back on Redis 2s after it came back", func() bool {
		return !l.Peek(ctx, "crd_load", rate).Fallback
	})
	back := time.Since(restarted)
	if back > 1200*time.Millisecond {
		t.Fatalf("back on Redis %v after it was restarted, want about 1s at most", back)
	}
	if n := logs.FilterMessageSnippet("reachable again").Len(); n != 1 {
		t.Fatalf("%d recovery lines logged, want 1", n)
	}
	t.Logf("%d decisions, %d by the fallback, slowest %v; back on Redis %v after restart",
		total.Load(), fellBack.Load(), time.Duration(slowest.Load()), back)

	// The restarted Redis started empty: what it holds now is what was
	// counted during the outage, flushed once it was back.
	other := newRedisLimiter(t, Config{Redis: srv.URL()})
	eventually.NoError(t, 2*time.Second, 20*time.Millisecond, "the outage's requests flushed to Redis", func() error {
		u, err := other.Usage(ctx, "crd_load", time.Now().Add(-time.Hour))
		var n int64
		for _, h := range u {
			n += h.Admitted + h.Refused
		}
		if err != nil || n != fellBack.Load() {
			return fmt.Errorf("Redis holds %d requests of the outage (err %v), want %d", n, err, fellBack.Load())
		}
		return nil
	})
}

// TestRedisSlow pauses Redis rather than killing it: connections stay up
// but answers do not come, which only the timeout can catch.
func TestRedisSlow(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 30 * time.Millisecond
	l := newRedisLimiter(t, Config{Redis: srv.URL(), Timeout: timeout})
	ctx := context.Background()
	l.Allow(ctx, "crd_a", tenPerSecond) // a warm connection

	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer raw.Close()
	const pause = 400 * time.Millisecond
	if err := raw.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	for range 5 {
		start := time.Now()
		d := l.Allow(ctx, "crd_a", tenPerSecond)
		if took := time.Since(start); took > timeout+30*time.Millisecond {
			t.Fatalf("decision took %v with Redis paused, timeout %v", took, timeout)
		}
		if !d.Fallback {
			t.Fatalf("decision %+v with Redis paused, want the fallback", d)
		}
	}
	eventually.True(t, pause+time.Second-time.Since(paused), 5*time.Millisecond, "decisions back on Redis a second after the pause ended", func() bool {
		return !l.Peek(ctx, "crd_a", tenPerSecond).Fallback
	})
	t.Logf("back on Redis %v after a %v pause began", time.Since(paused), pause)
}

// unreachableURL is a redis URL nothing listens on.
func unreachableURL(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "redis://" + addr + "/0"
}

func TestFallbackModes(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		mode    Fallback
		allowed int
	}{
		{FallbackLocal, 10},
		{FallbackAllow, 20},
		{FallbackDeny, 0},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			l := newRedisLimiter(t, Config{Redis: unreachableURL(t), Fallback: tt.mode})
			allowed := 0
			for range 20 {
				start := time.Now()
				d := l.Allow(ctx, "crd_a", tenPerSecond)
				if time.Since(start) > 100*time.Millisecond {
					t.Fatalf("a decision took %v", time.Since(start))
				}
				if !d.Fallback || d.Limit != 10 {
					t.Fatalf("decision %+v, want one by the fallback", d)
				}
				if d.Allowed {
					allowed++
				} else if d.RetryAfter <= 0 {
					t.Fatalf("refused without a RetryAfter: %+v", d)
				}
			}
			if allowed != tt.allowed {
				t.Fatalf("fallback %s admitted %d of 20, want %d", tt.mode, allowed, tt.allowed)
			}
			if tt.mode == FallbackDeny {
				if d := l.Allow(ctx, "crd_a", tenPerSecond); d.RetryAfter != time.Second {
					t.Fatalf("deny: RetryAfter %v, want 1s", d.RetryAfter)
				}
			}
		})
	}
}

// TestLocalFallbackCarriesOn checks that a credential that spent its burst
// through Redis does not get a fresh one when Redis goes away.
func TestLocalFallbackCarriesOn(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL()})
	ctx := context.Background()
	rate := Rate{Limit: 10, Window: time.Minute}
	for range 10 {
		l.Allow(ctx, "crd_a", rate)
	}
	srv.Kill()
	d := l.Allow(ctx, "crd_a", rate)
	if !d.Fallback || d.Allowed {
		t.Fatalf("after Redis went away: %+v, want refused by the local fallback", d)
	}
}

func TestScriptSurvivesScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL()})
	ctx := context.Background()
	l.Allow(ctx, "crd_a", tenPerSecond)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer raw.Close()
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := l.Allow(ctx, "crd_a", tenPerSecond); d.Fallback || !d.Allowed || d.Remaining != 8 {
		t.Fatalf("after SCRIPT FLUSH: %+v", d)
	}
	keys := raw.Keys(ctx, "pgw:*").Val()
	if strings.Join(keys, " ") == "" {
		t.Fatal("no pgw keys written")
	}
	for _, k := range keys {
		if !strings.HasSuffix(k, "{crd_a}") {
			t.Fatalf("key %q does not carry the credential as its hash tag", k)
		}
	}
}

// TestBatchInterval checks how requests are spaced into round trips. A
// request after a quiet spell goes at once, and so do requests made one at
// a time. Once a round trip has carried several, the
// next starts an interval after it, and the requests that arrive meanwhile
// share it. The interval is long here so that the test can tell.
func TestBatchInterval(t *testing.T) {
	srv := redistest.Start(t)
	const interval = 300 * time.Millisecond
	l := newRedisLimiter(t, Config{Redis: srv.URL(), Timeout: 2 * time.Second, BatchInterval: interval})
	ctx := context.Background()
	rate := Rate{Limit: 1000, Window: time.Hour}
	allow := func(n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if d := l.Allow(ctx, "crd_a", rate); d.Fallback || !d.Allowed {
					t.Errorf("request: %+v", d)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}

	for i := range 5 {
		if took := allow(1); took > interval/2 {
			t.Fatalf("request %d, one at a time, took %v; the interval is %v", i+1, took, interval)
		}
	}
	total := 5
	// Until a round trip carries several: the first of 20 at once may go
	// alone, and the rest queue behind it.
	for l.redis.script.lastSize.Load() < 2 {
		if total > 100 {
			t.Fatal("20 requests at once never shared a round trip")
		}
		allow(20)
		total += 20
	}
	before := l.redis.script.batches.Load()
	if took := allow(20); took < interval/2 {
		t.Errorf("requests right after a round trip of several were answered after %v; the interval is %v", took, interval)
	}
	if n := l.redis.script.batches.Load() - before; n != 1 {
		t.Errorf("20 requests within one interval took %d round trips, want 1", n)
	}
	total += 20
	if u, _ := l.Usage(ctx, "crd_a", time.Now().Add(-time.Hour)); len(u) != 1 || u[0].Admitted != int64(total) {
		t.Errorf("usage %+v, want %d admitted", u, total)
	}
}
