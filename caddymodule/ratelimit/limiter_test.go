package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/testclock"
)

func newLocal(t *testing.T, clock *testclock.Clock, usage UsageStore) *Limiter {
	t.Helper()
	l, err := New(Config{Clock: clock.Now, Usage: usage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

var tenPerSecond = Rate{Limit: 10, Window: time.Second}

func TestBurstBoundaryIsExact(t *testing.T) {
	clock := testclock.New(clockStart)
	l := newLocal(t, clock, nil)
	ctx := context.Background()

	for i := range 10 {
		d := l.Allow(ctx, "crd_a", tenPerSecond)
		if !d.Allowed || d.Remaining != int64(9-i) || d.Limit != 10 {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i+1, d, 9-i)
		}
		if d.Reset != time.Duration(i+1)*100*time.Millisecond {
			t.Fatalf("request %d: reset %v, want %v", i+1, d.Reset, time.Duration(i+1)*100*time.Millisecond)
		}
	}
	d := l.Allow(ctx, "crd_a", tenPerSecond)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 100*time.Millisecond || d.Reset != time.Second {
		t.Fatalf("11th request: %+v, want refused, retry after 100ms, reset 1s", d)
	}

	clock.Advance(99 * time.Millisecond)
	if d := l.Allow(ctx, "crd_a", tenPerSecond); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Fatalf("1ms early: %+v, want refused with 1ms to wait", d)
	}
	clock.Advance(time.Millisecond)
	if d := l.Allow(ctx, "crd_a", tenPerSecond); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after T: %+v, want exactly one more admitted", d)
	}
	if d := l.Allow(ctx, "crd_a", tenPerSecond); d.Allowed {
		t.Fatalf("after T, second: %+v, want refused", d)
	}
	// Another credential has its own bucket.
	if d := l.Allow(ctx, "crd_b", tenPerSecond); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("other credential: %+v", d)
	}
}

func TestRefusedRequestsCostNothing(t *testing.T) {
	clock := testclock.New(clockStart)
	l := newLocal(t, clock, nil)
	ctx := context.Background()
	for range 10 {
		l.Allow(ctx, "crd_a", tenPerSecond)
	}
	for range 500 {
		if l.Allow(ctx, "crd_a", tenPerSecond).Allowed {
			t.Fatal("admitted over the limit")
		}
	}
	clock.Advance(100 * time.Millisecond)
	if !l.Allow(ctx, "crd_a", tenPerSecond).Allowed {
		t.Fatal("500 refused requests pushed the next slot back; they must cost nothing")
	}
	// A client retrying as told gets in every time.
	for range 20 {
		d := l.Allow(ctx, "crd_a", tenPerSecond)
		if d.Allowed {
			t.Fatal("admitted without waiting")
		}
		clock.Advance(d.RetryAfter)
		if !l.Allow(ctx, "crd_a", tenPerSecond).Allowed {
			t.Fatalf("waited RetryAfter %v and was still refused", d.RetryAfter)
		}
	}
}

func TestLowerBurst(t *testing.T) {
	clock := testclock.New(clockStart)
	l := newLocal(t, clock, nil)
	ctx := context.Background()
	rate := Rate{Limit: 7200, Window: time.Hour, Burst: 3}
	for i := range 3 {
		if d := l.Allow(ctx, "crd_a", rate); !d.Allowed || d.Remaining != int64(2-i) || d.Limit != 7200 {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	d := l.Allow(ctx, "crd_a", rate)
	if d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("4th: %+v, want refused for T=500ms", d)
	}
	// Over an hour the whole quota still gets through, and no more.
	admitted := 3
	for range 7200 {
		clock.Advance(500 * time.Millisecond)
		for l.Allow(ctx, "crd_a", rate).Allowed {
			admitted++
		}
	}
	if admitted != 7203 {
		t.Fatalf("admitted %d in burst + one hour, want 3 + 7200", admitted)
	}
}

func TestPeekDoesNotSpend(t *testing.T) {
	clock := testclock.New(clockStart)
	l := newLocal(t, clock, nil)
	ctx := context.Background()
	if d := l.Peek(ctx, "crd_a", tenPerSecond); !d.Allowed || d.Remaining != 10 || d.Reset != 0 {
		t.Fatalf("peek at a full bucket: %+v", d)
	}
	for range 4 {
		l.Allow(ctx, "crd_a", tenPerSecond)
	}
	for range 50 {
		if d := l.Peek(ctx, "crd_a", tenPerSecond); d.Remaining != 6 || d.Reset != 400*time.Millisecond {
			t.Fatalf("peek: %+v, want 6 remaining, reset 400ms", d)
		}
	}
	for range 6 {
		l.Allow(ctx, "crd_a", tenPerSecond)
	}
	if d := l.Peek(ctx, "crd_a", tenPerSecond); d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("peek at an empty bucket: %+v", d)
	}
	u, _ := l.Usage(ctx, "crd_a", clock.Now().Add(-time.Hour))
	if len(u) != 1 || u[0].Admitted != 10 || u[0].Refused != 0 {
		t.Fatalf("usage %+v: peeks must not count", u)
	}
}

func TestSweepBoundsMemory(t *testing.T) {
	clock := testclock.New(clockStart)
	l := newLocal(t, clock, nil)
	ctx := context.Background()
	for i := range 1000 {
		l.Allow(ctx, "crd_"+string(rune('a'+i%26))+string(rune('a'+i/26)), tenPerSecond)
	}
	if n := l.local.size(); n != 1000 {
		t.Fatalf("%d buckets, want 1000", n)
	}
	clock.Advance(100 * time.Millisecond)
	l.local.sweep(clock.Now().UnixMicro())
	if n := l.local.size(); n != 0 {
		t.Fatalf("%d buckets left after every bucket filled up again, want 0", n)
	}
}

func TestNewRejectsUnknownFallback(t *testing.T) {
	if _, err := New(Config{Fallback: "maybe"}); err == nil {
		t.Fatal("New accepted fallback \"maybe\"")
	}
	if _, err := New(Config{Redis: "http://nope"}); err == nil {
		t.Fatal("New accepted a non-redis URL")
	}
}
