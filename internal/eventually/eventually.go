// Package eventually waits, in tests, for a condition that another goroutine
// or process makes true. It polls rather than sleeps a fixed time, so a
// test is as fast as the machine allows and fails only after a generous
// bound, with a message that says what it waited for (and, for NoError,
// what it saw last). The shape follows testify's Eventually and
// EventuallyWithT without the dependency.
package eventually

import (
	"testing"
	"time"
)

// True polls cond every tick until it holds. If it still does not hold
// after within, t fails with "timed out after <within> waiting for <what>".
// cond is called once before any wait, so a condition that already holds
// costs no tick.
func True(t testing.TB, within, tick time.Duration, what string, cond func() bool) {
	t.Helper()
	NoError(t, within, tick, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// NoError polls check every tick until it returns nil. If it still fails
// after within, t fails with the last error check returned: the state the
// test saw last is what a reader of the failure needs.
func NoError(t testing.TB, within, tick time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				t.Fatalf("timed out after %s waiting for %s", within, what)
			}
			t.Fatalf("timed out after %s waiting for %s: %v", within, what, err)
		}
		time.Sleep(tick)
	}
}

// errNotYet is what True's condition reports while it does not hold; it
// has nothing to add to the failure message.
var errNotYet = notYet{}

type notYet struct{}

func (notYet) Error() string { return "not yet" }
