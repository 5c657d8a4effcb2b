// Package subscription keeps alive the vendor subscriptions a document
// store's notifications come by (Microsoft Graph's subscriptions, Google
// Drive's push channels): made when a system opens, renewed before they
// lapse, made again when the vendor dropped them, and the secret each
// carries checked on every notification. What the gateway keeps of one is
// in the upstream state store, sealed, so that every instance checks a
// notification against it and any sync holder renews it.
package subscription

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice/changes"
)

// Subscription is what the gateway keeps of one vendor subscription.
type Subscription struct {
	// ID is the vendor's id (Graph's subscription id, the channel id the
	// gateway gave Drive); Resource what the vendor names it by besides
	// (Drive's resourceId).
	ID       string `json:"id,omitempty"`
	Resource string `json:"resource,omitempty"`
	// Secret is what the vendor sends back with each notification (Graph's
	// clientState, Drive's channel token): a notification without it is
	// not the vendor's.
	Secret string `json:"secret"`
	// Address is where the vendor notifies.
	Address string    `json:"address"`
	Expires time.Time `json:"expires,omitzero"`
	// Checked is when the vendor last confirmed it.
	Checked time.Time `json:"checked,omitzero"`
	// Lost says the vendor asked for it to be made again (Graph's
	// reauthorizationRequired), or dropped it.
	Lost bool `json:"lost,omitempty"`
	// Previous is the subscription this one replaced, whose
	// notifications count until it lapses (a Drive channel is replaced,
	// not renewed).
	Previous *Subscription `json:"previous,omitempty"`
}

// Vendor makes and ends one vendor's subscriptions.
type Vendor interface {
	// Create makes a subscription notifying address, carrying secret,
	// until about until (the vendor may give less).
	Create(ctx context.Context, address, secret string, until time.Time) (Subscription, error)
	// Delete ends s at the vendor; one it no longer has is no error.
	Delete(ctx context.Context, s Subscription) error
}

// Renewer is a Vendor that extends a subscription (Graph); one that does
// not (Drive) has it replaced by a new one before it lapses.
type Renewer interface {
	// Renew extends s to about until: ErrGone when the vendor no longer
	// has it.
	Renew(ctx context.Context, s Subscription, until time.Time) (Subscription, error)
}

// Checker is a Vendor that can say whether it still has a subscription
// (Graph can; Drive cannot, and its channels are replaced often instead).
type Checker interface {
	Exists(ctx context.Context, s Subscription) (bool, error)
}

// ErrGone is a subscription the vendor no longer has.
var ErrGone = errors.New("the vendor no longer has the subscription")

// Clock tells time.
type Clock interface{ Now() time.Time }

// Keeper keeps one system's subscription alive.
type Keeper struct {
	// State keeps the subscription under Key (sealed by the store).
	State changes.StateStore
	Key   string
	// Address is where the gateway takes the system's notifications;
	// empty when it knows none, and then none is made.
	Address string
	// Life is how long a subscription is asked for, Renew how much of it
	// is left when it is renewed, Check how often the vendor is asked
	// whether it still has it (a Checker).
	Life, Renew, Check time.Duration
	Vendor             Vendor
	Clock              Clock

	// mu makes one Keep at a time in this process; across instances only
	// the sync's holder keeps.
	mu sync.Mutex
}

// Keep makes the subscription, renews it or makes it again as it needs,
// and answers when it lapses; zero when there is none to make (no
// Address).
func (k *Keeper) Keep(ctx context.Context) (time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := k.load(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := k.Clock.Now()
	if k.Address == "" {
		if s != nil {
			k.end(ctx, s)
			return time.Time{}, k.save(ctx, nil)
		}
		return time.Time{}, nil
	}
	switch {
	case s == nil || s.ID == "" || s.Lost || s.Address != k.Address || !now.Before(s.Expires):
		return k.create(ctx, s)
	case s.Expires.Sub(now) < k.Renew:
		r, ok := k.Vendor.(Renewer)
		if !ok {
			return k.create(ctx, s)
		}
		renewed, err := r.Renew(ctx, *s, now.Add(k.Life))
		if errors.Is(err, ErrGone) {
			return k.create(ctx, s)
		}
		if err != nil {
			return s.Expires, err
		}
		renewed.Secret, renewed.Address, renewed.Checked = s.Secret, s.Address, now
		return renewed.Expires, k.save(ctx, &renewed)
	}
	if c, ok := k.Vendor.(Checker); ok && k.Check > 0 && now.Sub(s.Checked) >= k.Check {
		exists, err := c.Exists(ctx, *s)
		if err != nil {
			return s.Expires, err
		}
		if !exists {
			return k.create(ctx, s)
		}
		s.Checked = now
		return s.Expires, k.save(ctx, s)
	}
	return s.Expires, nil
}

// create makes a new subscription, in place of old (which is ended). The
// new one's secret is kept before the vendor is asked, so that a
// notification arriving before its answer is taken.
func (k *Keeper) create(ctx context.Context, old *Subscription) (time.Time, error) {
	pending := &Subscription{Secret: newSecret(), Address: k.Address}
	if old != nil {
		prev := *old
		prev.Previous = nil
		pending.Previous = &prev
	}
	if err := k.save(ctx, pending); err != nil {
		return time.Time{}, err
	}
	now := k.Clock.Now()
	s, err := k.Vendor.Create(ctx, k.Address, pending.Secret, now.Add(k.Life))
	if err != nil {
		return time.Time{}, fmt.Errorf("subscribe: %w", err)
	}
	s.Secret, s.Address, s.Checked = pending.Secret, k.Address, now
	if old != nil && old.ID != "" && old.ID != s.ID {
		k.end(ctx, old)
	}
	return s.Expires, k.save(ctx, &s)
}

// end deletes s at the vendor, best effort: the vendor lets one it is
// not asked about lapse.
func (k *Keeper) end(ctx context.Context, s *Subscription) {
	if s.ID != "" {
		_ = k.Vendor.Delete(ctx, *s)
	}
}

// Verify reports whether a notification naming id (empty when the
// vendor names none) and carrying secret is of the subscription kept, or
// of the one it replaced.
func (k *Keeper) Verify(ctx context.Context, id, secret string) (bool, error) {
	s, err := k.load(ctx)
	if err != nil || s == nil || secret == "" {
		return false, err
	}
	for cur := s; cur != nil; cur = cur.Previous {
		if subtle.ConstantTimeCompare([]byte(cur.Secret), []byte(secret)) == 1 && (id == "" || cur.ID == "" || cur.ID == id) {
			return true, nil
		}
	}
	return false, nil
}

// Lost marks the subscription of id as to be made again: the sync's
// holder makes it at its next Keep.
func (k *Keeper) Lost(ctx context.Context, id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := k.load(ctx)
	if err != nil || s == nil || s.ID != id {
		return err
	}
	s.Lost = true
	return k.save(ctx, s)
}

// Live is the subscription kept, nil when there is none.
func (k *Keeper) Live(ctx context.Context) (*Subscription, error) { return k.load(ctx) }

func (k *Keeper) load(ctx context.Context) (*Subscription, error) {
	raw, err := k.State.Last(ctx, k.Key)
	if err != nil || len(raw) == 0 {
		return nil, err
	}
	var s Subscription
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil // unreadable: made again
	}
	return &s, nil
}

func (k *Keeper) save(ctx context.Context, s *Subscription) error {
	if s == nil {
		return k.State.Save(ctx, k.Key, nil)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return k.State.Save(ctx, k.Key, raw)
}

// newSecret is 32 random bytes in hex: within Graph's 128 characters of
// clientState and Drive's 256 of a channel token.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
