package ratelimit

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

	for l.Peek(ctx, "crd_after", tenPerSecond).Fallback {
		if time.Since(paused) > pause+time.Second {
			t.Fatal("still on the fallback a second after the pause ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
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

// encoded is a batch that has just encoded calls.
func encoded(calls ...*scriptCall) *batch {
	b := newBatch()
	b.encode(calls)
	return b
}

// TestDecodeBatch feeds the reply reader what the script may answer for a
// batch of two requests of one credential, and what it should not.
func TestDecodeBatch(t *testing.T) {
	ten := tenPerSecond.cell() // T 100ms, B·T 1s
	allowed := Decision{Allowed: true, Remaining: 0, Reset: time.Second}
	refused := Decision{Reset: time.Second, RetryAfter: 100 * time.Millisecond}
	for _, tt := range []struct {
		name  string
		reply any
		want  []Decision
		err   string // "" none; else a substring
	}{
		// Booked to 900ms ahead: room for one more.
		{"one of two", []any{int64(900000), int64(1)}, []Decision{allowed, refused}, ""},
		{"half a group", []any{int64(900000)}, nil, "answered"},
		{"not an array", int64(1), nil, "answered"},
		{"string element", []any{"9", int64(1)}, nil, "answered"},
		{"more admitted than asked", []any{int64(0), int64(3)}, nil, "answered"},
		{"TAT behind now", []any{int64(-1), int64(0)}, nil, "answered"},
		// An empty bucket admits both; Redis says it admitted one.
		{"disagreement", []any{int64(0), int64(1)}, nil, "disagree"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := encoded(&scriptCall{id: "crd_a", cell: ten, consume: true}, &scriptCall{id: "crd_a", cell: ten, consume: true})
			got, err := b.decode(tt.reply)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one saying %q", err, tt.err)
			}
			if err != nil {
				got = nil
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("decisions %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzDecodeBatch decodes arbitrary integer arrays as the reply for three
// requests in two groups: no panic, and decisions only from an array of
// four integers in range.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(int64(900000), int64(1), int64(0), int64(0), uint8(4))
	f.Add(int64(-1), int64(99), int64(0), int64(0), uint8(3))
	ten := tenPerSecond.cell()
	f.Fuzz(func(t *testing.T, a, b, c, d int64, n uint8) {
		reply := []any{a, b, c, d}[:min(int(n), 4)]
		enc := encoded(&scriptCall{id: "crd_a", cell: ten, consume: true},
			&scriptCall{id: "crd_b", cell: ten}, &scriptCall{id: "crd_a", cell: ten, consume: true})
		got, err := enc.decode(reply)
		if err != nil && got != nil {
			t.Fatalf("decisions %+v with error %v", got, err)
		}
		if err == nil && (len(got) != 3 || len(reply) != 4) {
			t.Fatalf("decisions %+v from %v", got, reply)
		}
	})
}

// TestEncodeBatch checks the script call a batch becomes: each
// credential's keys once, in order of first appearance, and six arguments
// a group pointing at them, with the group's size.
func TestEncodeBatch(t *testing.T) {
	ten, two := tenPerSecond.cell(), Rate{Limit: 2, Window: time.Second}.cell()
	b := encoded(
		&scriptCall{id: "crd_b", cell: ten, consume: true},
		&scriptCall{id: "crd_a", cell: two, consume: false, now: 1700000000000000},
		&scriptCall{id: "crd_b", cell: ten, consume: true},
		&scriptCall{id: "crd_b", cell: ten, consume: false},
	)
	wantKeys := []string{"pgw:rl:{crd_b}", "pgw:usage:{crd_b}", "pgw:rl:{crd_a}", "pgw:usage:{crd_a}"}
	if !slices.Equal(b.keys, wantKeys) {
		t.Fatalf("keys %q, want %q", b.keys, wantKeys)
	}
	wantArgs := []any{strconv.Itoa(retentionHours),
		int64(1), int64(100000), int64(1000000), int64(1), int64(0), int64(2),
		int64(2), int64(500000), int64(1000000), int64(0), int64(1700000000000000), int64(1),
		int64(1), int64(100000), int64(1000000), int64(0), int64(0), int64(1),
	}
	if !slices.Equal(b.args, wantArgs) {
		t.Fatalf("args\n%v\nwant\n%v", b.args, wantArgs)
	}
	if !slices.Equal(b.callGroup, []int{0, 1, 0, 2}) {
		t.Fatalf("calls' groups %v, want [0 1 0 2]", b.callGroup)
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
