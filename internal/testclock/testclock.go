// Package testclock is the clock tests inject in place of the system's:
// its time moves only when the test moves it (Advance, Set) or when the
// code under test sleeps on it (Sleep, which returns at once), never by
// itself, so a schedule, a lease or a backoff is checked without waiting
// for it. Code takes it as a func() time.Time (pass c.Now) or as an
// interface with Now, and Sleep where it waits.
package testclock

import (
	"context"
	"sync"
	"time"
)

// Clock is safe for concurrent use: the code under test reads it from its
// own goroutines while the test moves it.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

// New starts a clock at now.
func New(now time.Time) *Clock { return &Clock{now: now} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock on to t; a t before the clock's time leaves it, as
// time does not run back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// Sleep moves the clock on by d at once and records that d was asked for;
// it returns ctx's error, so a cancelled wait still reports it.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

// Slept lists the sleeps asked for so far.
func (c *Clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}
