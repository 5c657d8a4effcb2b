package ratelimit

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// TestPipelinedDecisionsAreExact has many callers decide at once for a few
// credentials, each with its own ceiling, so that their calls share
// batches. Every credential must admit exactly its ceiling, and the
// admitted requests must have seen each remaining count exactly once: a
// reply handed to the wrong caller, or a call lost or run twice, would
// show as a gap or a repeat.
func TestPipelinedDecisionsAreExact(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL(), Timeout: time.Second})
	ctx := context.Background()

	const callers, perCaller, creds = 64, 10, 4
	rates := make([]Rate, creds)
	for i := range rates {
		// An hour's window: no refill during the test.
		rates[i] = Rate{Limit: int64(100 + 7*i), Window: time.Hour}
	}
	var (
		mu        sync.Mutex
		remaining = make([][]int64, creds)
		refused   = make([]int64, creds)
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			<-start
			for j := range perCaller {
				i := (g + j) % creds
				d := l.Allow(ctx, "crd_p"+strconv.Itoa(i), rates[i])
				if d.Fallback {
					t.Errorf("decision by the fallback with Redis up: %+v", d)
					return
				}
				mu.Lock()
				if d.Allowed {
					remaining[i] = append(remaining[i], d.Remaining)
				} else {
					refused[i]++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}

	const total = callers * perCaller
	for i, rate := range rates {
		got := slices.Sorted(slices.Values(remaining[i]))
		want := make([]int64, rate.Limit)
		for k := range want {
			want[k] = int64(k)
		}
		if !slices.Equal(got, want) {
			t.Errorf("crd_p%d (limit %d): admitted with remaining %v, want each of 0..%d once", i, rate.Limit, got, rate.Limit-1)
		}
		if n := int64(total/creds) - rate.Limit; refused[i] != n {
			t.Errorf("crd_p%d: %d refused, want %d", i, refused[i], n)
		}
		u, err := l.Usage(ctx, "crd_p"+strconv.Itoa(i), time.Now().Add(-time.Hour))
		if err != nil || len(u) != 1 || u[0].Admitted != rate.Limit || u[0].Refused != refused[i] {
			t.Errorf("crd_p%d: usage %+v (err %v), want %d admitted, %d refused", i, u, err, rate.Limit, refused[i])
		}
	}
	batches := l.redis.script.batches.Load()
	if batches*2 > total {
		t.Errorf("%d calls took %d writes: concurrent calls did not share batches", total, batches)
	}
	t.Logf("%d calls in %d batches", total, batches)
}

// TestPipelineDeadlineInFlight pauses Redis after a batch is written, so
// that its callers' deadlines pass while it is in flight: each must be
// answered by the fallback within about its timeout, and once Redis
// answers again the limiter must be back on Redis with every reply going
// to the caller it belongs to.
func TestPipelineDeadlineInFlight(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 30 * time.Millisecond
	l := newRedisLimiter(t, Config{Redis: srv.URL(), Timeout: timeout, ProbeInterval: 20 * time.Millisecond})
	ctx := context.Background()
	if d := l.Allow(ctx, "crd_warm", tenPerSecond); d.Fallback {
		t.Fatalf("warm-up: %+v", d)
	}

	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer raw.Close()
	const pause = 300 * time.Millisecond
	if err := raw.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			start := time.Now()
			d := l.Allow(ctx, "crd_stuck", Rate{Limit: 1000, Window: time.Hour})
			if took := time.Since(start); took > timeout+30*time.Millisecond {
				t.Errorf("decision took %v with its batch stuck, timeout %v", took, timeout)
			}
			if !d.Fallback || !d.Allowed {
				t.Errorf("decision %+v with its batch stuck, want admitted by the local fallback", d)
			}
		})
	}
	wg.Wait()

	eventually.True(t, pause+time.Second-time.Since(paused), 5*time.Millisecond, "decisions back on Redis a second after the pause ended", func() bool {
		return !l.Peek(ctx, "crd_after", tenPerSecond).Fallback
	})
	// Sequential, so the order of the replies is known.
	for i := range 12 {
		d := l.Allow(ctx, "crd_after", tenPerSecond)
		want := Decision{Allowed: i < 10, Remaining: max(9-int64(i), 0), Limit: 10}
		if d.Fallback || d.Allowed != want.Allowed || d.Remaining != want.Remaining {
			t.Fatalf("request %d after recovery: %+v, want allowed %v with %d remaining from Redis",
				i+1, d, want.Allowed, want.Remaining)
		}
	}
}

// TestCloseAnswersQueuedCalls checks that Close neither hangs nor leaves a
// caller waiting for its whole timeout.
func TestCloseAnswersQueuedCalls(t *testing.T) {
	srv := redistest.Start(t)
	l := newRedisLimiter(t, Config{Redis: srv.URL(), Timeout: 5 * time.Second})
	ctx := context.Background()
	l.Allow(ctx, "crd_a", tenPerSecond)

	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 20 {
				l.Allow(ctx, "crd_a", Rate{Limit: 1000, Window: time.Hour})
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close and the callers it left took %v; the timeout is 5s, but nothing was slow", took)
	}
	start = time.Now()
	if _, err := l.redis.decide(ctx, "crd_a", tenPerSecond.cell(), true, 0); !errors.Is(err, errClosed) || time.Since(start) > time.Second {
		t.Fatalf("a script call after Close: %v after %v, want errClosed at once", err, time.Since(start))
	}
}
