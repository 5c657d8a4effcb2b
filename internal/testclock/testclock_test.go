package testclock_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/testclock"
)

var start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func TestTimeMovesOnlyWhenMoved(t *testing.T) {
	c := testclock.New(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now %v, want %v", c.Now(), start)
	}
	c.Advance(90 * time.Second)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after Advance: %v, want %v", c.Now(), want)
	}
	c.Set(start.Add(time.Hour))
	c.Set(start) // back in time: ignored
	if want := start.Add(time.Hour); !c.Now().Equal(want) {
		t.Fatalf("after Set: %v, want %v", c.Now(), want)
	}
}

func TestSleepMovesTheClockAndIsRecorded(t *testing.T) {
	c := testclock.New(start)
	if err := c.Sleep(context.Background(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, 5*time.Second); err != context.Canceled {
		t.Fatalf("a cancelled sleep returned %v", err)
	}
	if got, want := c.Slept(), []time.Duration{3 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("Slept %v, want %v", got, want)
	}
	if want := start.Add(8 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("Now %v, want %v", c.Now(), want)
	}
}

// Readers on other goroutines see the clock only move forward while the
// test moves it (run with -race for the locking).
func TestConcurrentReadersSeeTimeOnlyMoveOn(t *testing.T) {
	c := testclock.New(start)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			last := c.Now()
			for range 1000 {
				now := c.Now()
				if now.Before(last) {
					t.Errorf("time ran back from %v to %v", last, now)
					return
				}
				last = now
			}
		})
	}
	for i := range 1000 {
		if i%2 == 0 {
			c.Advance(time.Millisecond)
		} else {
			c.Set(c.Now().Add(time.Millisecond))
		}
	}
	wg.Wait()
}
