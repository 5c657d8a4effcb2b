package upstream

import (
	"sync"
	"time"
)

// Cached is a value read from a vendor and kept for a while: settings,
// a user directory, lists of states. The zero value is empty.
type Cached[T any] struct {
	mu      sync.Mutex
	v       T
	fetched time.Time
}

// Get returns the value kept, or when it is older than ttl (or there is
// none) the one fetch reads; a failed fetch keeps nothing. Callers for the
// same value wait for one fetch.
func (c *Cached[T]) Get(now time.Time, ttl time.Duration, fetch func() (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
