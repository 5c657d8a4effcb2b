package eventually_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// recorder is a testing.TB whose Fatalf ends only the goroutine that
// called it, so a test can see how eventually fails.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder in its own goroutine and returns the
// failure message, empty when f did not fail.
func run(t *testing.T, f func(testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

func TestTrueReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	msg := run(t, func(tb testing.TB) {
		eventually.True(tb, 5*time.Second, time.Millisecond, "the third call", func() bool {
			return calls.Add(1) >= 3
		})
	})
	if msg != "" || calls.Load() != 3 {
		t.Fatalf("failed %q after %d calls; want success on the third call", msg, calls.Load())
	}
}

func TestTrueChecksBeforeItWaits(t *testing.T) {
	start := time.Now()
	msg := run(t, func(tb testing.TB) {
		eventually.True(tb, time.Minute, time.Minute, "a condition that holds", func() bool { return true })
	})
	if msg != "" || time.Since(start) > 30*time.Second {
		t.Fatalf("failed %q after %s; a condition that holds must cost no tick", msg, time.Since(start))
	}
}

func TestTrueFailsAfterTheDeadlineSayingWhat(t *testing.T) {
	start := time.Now()
	var calls atomic.Int32
	msg := run(t, func(tb testing.TB) {
		eventually.True(tb, 50*time.Millisecond, 5*time.Millisecond, "the moon", func() bool {
			calls.Add(1)
			return false
		})
	})
	if want := "timed out after 50ms waiting for the moon"; msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %s, before the deadline", took)
	}
	if calls.Load() < 2 {
		t.Fatalf("cond called %d times; want it polled", calls.Load())
	}
}

func TestNoErrorReportsTheLastError(t *testing.T) {
	var calls atomic.Int32
	msg := run(t, func(tb testing.TB) {
		eventually.NoError(tb, 30*time.Millisecond, time.Millisecond, "deliveries", func() error {
			return fmt.Errorf("%d deliveries, want 3", calls.Add(1))
		})
	})
	last := fmt.Sprintf("%d deliveries, want 3", calls.Load())
	if !strings.HasPrefix(msg, "timed out after 30ms waiting for deliveries: ") || !strings.HasSuffix(msg, last) {
		t.Fatalf("message %q; want the last error %q", msg, last)
	}
}

func TestNoErrorReturnsOnNil(t *testing.T) {
	var calls atomic.Int32
	msg := run(t, func(tb testing.TB) {
		eventually.NoError(tb, 5*time.Second, time.Millisecond, "a nil", func() error {
			if calls.Add(1) < 2 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || calls.Load() != 2 {
		t.Fatalf("failed %q after %d calls", msg, calls.Load())
	}
}
