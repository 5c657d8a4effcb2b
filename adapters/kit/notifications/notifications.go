// Package notifications keeps a vendor's change notifications (Karbon's
// and Xero's webhooks) from costing more than they are worth: a body
// already handled within the last hour is acknowledged without reading the
// vendor again, and the work one body can cause is bounded in records and
// time.
//
// A signature proves who wrote a body, not when: Karbon's has no
// timestamp, so a captured notification posted again verifies for ever,
// and each time the gateway would re-read its records from the vendor,
// spending the firm's share of the vendor's small budget.
package notifications

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Window is how long a body handled stays handled. A vendor's
// redeliveries of a body it saw fail come within it; a change after it
// reaches the read model by the sync whatever webhooks say.
const Window = time.Hour

// Log remembers the notification bodies handled within the window. With
// Redis it is shared, so a replay sent to another instance is caught
// too; alone, it is the bbolt file (or memory).
type Log interface {
	// ClaimNotification takes key for ttl, reporting false if it is
	// taken already.
	ClaimNotification(ctx context.Context, key string, ttl time.Duration) (bool, error)
	// ReleaseNotification gives key back, so that the vendor's
	// redelivery of a body whose work failed is handled.
	ReleaseNotification(ctx context.Context, key string) error
}

// Guard runs the work of verified notification bodies once per Window.
type Guard struct {
	// Log is where bodies handled are kept. Required.
	Log Log
	// OnLogDown is told when Log fails; the body is then handled anyway,
	// since refusing it would lose the change (Karbon ends a subscription
	// that fails ten times) and the vendor budget still bounds the reads.
	OnLogDown func(error)
}

// Once runs work for body (already verified as the vendor's) unless the
// same body, for the same scope (firm and system), was handled within the
// Window: then it reports repeat and does nothing. Work that fails gives
// the body back, so the vendor's redelivery is handled.
func (g Guard) Once(ctx context.Context, scope string, body []byte, work func(context.Context) error) (repeat bool, err error) {
	log := g.Log
	sum := sha256.Sum256(body)
	key := scope + ":" + hex.EncodeToString(sum[:])
	fresh, err := log.ClaimNotification(ctx, key, Window)
	if err != nil {
		if g.OnLogDown != nil {
			g.OnLogDown(err)
		}
		return false, work(ctx)
	}
	if !fresh {
		return true, nil
	}
	if err := work(ctx); err != nil {
		// Work cut short by its time bound still gives the body back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		return false, errors.Join(err, log.ReleaseNotification(rctx, key))
	}
	return false, nil
}

// Limit keeps the first max items of distinct keys (a body may name the
// same record many times; it is read once), and says how many distinct
// ones it left out.
func Limit[T any, K comparable](items []T, key func(T) K, max int) (kept []T, over int) {
	seen := make(map[K]bool, len(items))
	for _, it := range items {
		k := key(it)
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(kept) == max {
			over++
			continue
		}
		kept = append(kept, it)
	}
	return kept, over
}

// Memory is a Log in this process, for tests and adapters given no store.
type Memory struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]time.Time // key -> expiry
}

// NewMemory makes an empty Memory on clock now (nil: the system clock).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, m: map[string]time.Time{}}
}

// ClaimNotification implements Log.
func (m *Memory) ClaimNotification(_ context.Context, key string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, exp := range m.m {
		if !now.Before(exp) {
			delete(m.m, k)
		}
	}
	if _, ok := m.m[key]; ok {
		return false, nil
	}
	m.m[key] = now.Add(ttl)
	return true, nil
}

// ReleaseNotification implements Log.
func (m *Memory) ReleaseNotification(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
	return nil
}
