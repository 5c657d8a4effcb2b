package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/testclock"
	"github.com/practicegw/practicegw/store/storetest"
	"github.com/practicegw/practicegw/store/usage"
)

func TestLocalUsageForAWeek(t *testing.T) {
	clock := testclock.New(clockStart)
	store := newMemoryUsage()
	l := newLocal(t, clock, store)
	ctx := context.Background()
	start := clock.Now()
	rate := Rate{Limit: 3, Window: time.Hour}

	var want []usage.Hour
	for h := range 7 * 24 {
		got := weekOfTrafficHour(ctx, l, clock, rate, h)
		want = append(want, got)
		if h%10 == 0 {
			if err := l.flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := l.Usage(ctx, "crd_a", start)
	if err != nil {
		t.Fatal(err)
	}
	assertUsage(t, got, want)

	// Everything reaches the store, and nothing twice.
	if err := l.flush(ctx); err != nil {
		t.Fatal(err)
	}
	stored, _ := store.Usage(ctx, "crd_a", start)
	assertUsage(t, stored, want)
	got, _ = l.Usage(ctx, "crd_a", start)
	assertUsage(t, got, want)
}

// weekOfTrafficHour makes h%5+1 requests in the clock's current hour under
// a rate of 3 per hour, then moves the clock on an hour.
func weekOfTrafficHour(ctx context.Context, l *Limiter, clock *testclock.Clock, rate Rate, h int) usage.Hour {
	u := usage.Hour{Hour: clock.Now().Truncate(time.Hour)}
	for range h%5 + 1 {
		if l.Allow(ctx, "crd_a", rate).Allowed {
			u.Admitted++
		} else {
			u.Refused++
		}
	}
	clock.Advance(time.Hour)
	return u
}

func assertUsage(t *testing.T, got, want []usage.Hour) {
	t.Helper()
	var nonzero []usage.Hour
	for _, u := range want {
		if u.Admitted+u.Refused > 0 {
			nonzero = append(nonzero, u)
		}
	}
	if len(got) != len(nonzero) {
		t.Fatalf("got %d hours, want %d", len(got), len(nonzero))
	}
	for i := range got {
		if !got[i].Hour.Equal(nonzero[i].Hour) || got[i].Admitted != nonzero[i].Admitted || got[i].Refused != nonzero[i].Refused {
			t.Fatalf("hour %d: got %+v, want %+v", i, got[i], nonzero[i])
		}
	}
}

func TestMemoryUsageKeepsEightDays(t *testing.T) {
	ctx := context.Background()
	m := newMemoryUsage()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	m.AddUsage(ctx, "crd_old", base, 1, 0)
	m.AddUsage(ctx, "crd_a", base, 1, 0)
	m.AddUsage(ctx, "crd_a", base.Add(8*24*time.Hour), 2, 1)
	m.AddUsage(ctx, "crd_a", base.Add(8*24*time.Hour+time.Hour), 3, 0)

	got, _ := m.Usage(ctx, "crd_a", time.Time{})
	if len(got) != 2 || got[0].Admitted != 2 || got[0].Refused != 1 || got[1].Admitted != 3 {
		t.Fatalf("usage %+v, want only the last 8 days", got)
	}
	if _, ok := m.hours["crd_old"]; ok {
		t.Fatal("a credential unused for 8 days is still held")
	}
	// Counts for an hour already past retention are dropped, not kept.
	m.AddUsage(ctx, "crd_b", base, 1, 0)
	if got, _ := m.Usage(ctx, "crd_b", time.Time{}); len(got) != 0 {
		t.Fatalf("usage %+v for an hour past retention", got)
	}
}

// flakyStore fails while down is set.
type flakyStore struct {
	*MemoryUsage
	mu   sync.Mutex
	down bool
	adds int
}

func (f *flakyStore) AddUsage(ctx context.Context, id string, hour time.Time, a, r int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adds++
	if f.down {
		return errors.New("disk full")
	}
	return f.MemoryUsage.AddUsage(ctx, id, hour, a, r)
}

func TestFlushBatchesAndKeepsWhatTheStoreRefuses(t *testing.T) {
	clock := testclock.New(clockStart)
	store := &flakyStore{MemoryUsage: newMemoryUsage(), down: true}
	l := newLocal(t, clock, store)
	ctx := context.Background()
	for range 100 {
		l.Allow(ctx, "crd_a", tenPerSecond)
	}
	if err := l.flush(ctx); err == nil {
		t.Fatal("flush hid the store's error")
	}
	if store.adds != 1 {
		t.Fatalf("%d writes for 100 requests of one credential in one hour, want 1", store.adds)
	}
	got, _ := l.Usage(ctx, "crd_a", clock.Now().Add(-time.Hour))
	if len(got) != 1 || got[0].Admitted != 10 || got[0].Refused != 90 {
		t.Fatalf("usage while the store is down: %+v", got)
	}
	store.down = false
	if err := l.flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = store.Usage(ctx, "crd_a", clock.Now().Add(-time.Hour))
	if len(got) != 1 || got[0].Admitted != 10 || got[0].Refused != 90 {
		t.Fatalf("stored after recovery: %+v", got)
	}
}

func TestCloseFlushes(t *testing.T) {
	clock := testclock.New(clockStart)
	store := newMemoryUsage()
	l, err := New(Config{Clock: clock.Now, Usage: store})
	if err != nil {
		t.Fatal(err)
	}
	l.Allow(context.Background(), "crd_a", tenPerSecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Usage(context.Background(), "crd_a", time.Time{}); len(got) != 1 || got[0].Admitted != 1 {
		t.Fatalf("stored after Close: %+v", got)
	}
}

// The in-process usage store, the default without Redis or the embedded
// store, meets the same suite as theirs.
func TestMemoryUsageConformance(t *testing.T) {
	storetest.Usage(t, func(t *testing.T) (storetest.UsageStore, storetest.UsageStore) {
		m := newMemoryUsage()
		return m, m
	})
}
