package upstream

import (
	"sync"
	"time"
)

// Cached is a value read from a vendor and kept for a while: settings,
// a user directory, lists of states. The zero value is empty.
type Cached[T any] struct {
	once sync.Once
	// turn lets one fetch run at a time. A channel rather than a mutex:
	// a caller waiting behind a fetch that sits out the vendor's budget
	// is then a wait a simulated clock (testing/synctest) can skip.
	turn    chan struct{}
	v       T
	fetched time.Time
}

// Get returns the value kept, or when it is older than ttl (or there is
// none) the one fetch reads; a failed fetch keeps nothing. Callers for the
// same value wait for one fetch.
func (c *Cached[T]) Get(now time.Time, ttl time.Duration, fetch func() (T, error)) (T, error) {
	c.once.Do(func() { c.turn = make(chan struct{}, 1) })
	c.turn <- struct{}{}
	defer func() { <-c.turn }()
	if !c.fetched.IsZero() && now.Sub(c.fetched) < ttl {
		return c.v, nil
	}
	v, err := fetch()
	if err != nil {
		return v, err
	}
	c.v, c.fetched = v, now
	return v, nil
}
