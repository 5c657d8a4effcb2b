package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// onDemandShare is the part of each of a vendor account's allowances that
// one firm system's on-demand reads may spend: the reads of a record the
// read model has not copied yet. Small, so that a credential reading
// while a backfill runs or fails cannot spend what writes and the sync
// need (Karbon: 12 a minute; Xero: 6 a minute and 500 a day).
const onDemandShare = 0.1

// MissTTL is how long a record the vendor said it does not have, or whose
// answer could not be used (practice.UnusableError), is answered so
// without asking again: the sync asks for it on its own schedule.
const MissTTL = 10 * time.Minute

// maxMisses bounds the misses remembered per firm system.
const maxMisses = 10_000

// errReadShareSpent is why an on-demand read was refused.
var errReadShareSpent = errors.New("the share of the vendor's allowance kept for reads of records not yet copied is spent")

// OnDemand is a firm system's reader for the reads the read model sends to
// the vendor (a record not yet copied): each is booked against a small
// share of the vendor's allowances (onDemandShare, in the Budget every
// instance shares), a miss is remembered for MissTTL, and an answer that
// is not the record asked for is a bad upstream answer. Lists pass
// through: the read model does not send them.
//
// An answer that cannot be used is remembered as a miss is: reading such
// a record thirty times asks the vendor once.
type OnDemand struct {
	practice.Reader
	name   string
	label  string
	budget Budget
	shares []Allowance
	clock  Clock

	mu     sync.Mutex
	misses map[missKey]miss
}

// miss is a read answered without asking again until until: not found, or
// the unusable answer err.
type miss struct {
	until time.Time
	err   *practice.UnusableError
}

type missKey struct {
	kind practice.Kind
	id   string
}

// NewOnDemand guards r's single-record reads for the firm system name
// ("frm_acme/records") with a share of c's allowances, booked in budget
// (nil: in this process). A nil c (no vendor client) books nothing.
func NewOnDemand(r practice.Reader, c *Client, budget Budget, name string) *OnDemand {
	o := &OnDemand{Reader: r, name: name, label: name, budget: budget, clock: SystemClock{}, misses: map[missKey]miss{}}
	if c == nil {
		return o
	}
	o.label, o.clock = c.label, c.clock
	if o.budget == nil {
		o.budget = NewLocalBudget(c.clock)
	}
	for _, a := range c.Allowances() {
		o.shares = append(o.shares, Allowance{Limit: max(1, int(math.Floor(onDemandShare*float64(a.Limit)))), Per: a.Per})
	}
	return o
}

// Get reads one record from the vendor within the share.
func (o *OnDemand) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	key := missKey{k, id}
	if m, ok := o.missed(key); ok {
		if m.err != nil {
			return nil, m.err
		}
		return nil, fmt.Errorf("%s %s (not found at the vendor lately): %w", k.Singular(), id, practice.ErrNotFound)
	}
	if err := o.book(ctx); err != nil {
		return nil, err
	}
	raw, err := o.Reader.Get(ctx, t, k, id)
	var unusable *practice.UnusableError
	switch {
	case errors.As(err, &unusable):
		o.remember(key, unusable)
		return nil, err
	case errors.Is(err, practice.ErrNotFound):
		o.remember(key, nil)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.ID != id {
		return nil, Malformed(o.label, fmt.Sprintf("%s %s", k.Singular(), id), fmt.Errorf("the answer is record %q", v.ID))
	}
	return raw, nil
}

// book takes one read from each share, or says how long until one fits.
// A budget store that is down does not refuse reads: the client's own
// budget and the vendor's 429s still guard.
func (o *OnDemand) book(ctx context.Context) error {
	for _, a := range o.shares {
		limit, per := a.booked()
		wait, err := o.budget.Take(ctx, "ondemand:"+o.name+"/"+a.Per.String(), limit, per)
		if err != nil {
			return nil
		}
		if wait > 0 {
			return &practice.UnavailableError{Upstream: o.label, RetryAfter: wait,
				Err: fmt.Errorf("%w (%d per %s)", errReadShareSpent, a.Limit, a.Per)}
		}
	}
	return nil
}

func (o *OnDemand) missed(key missKey) (miss, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m, ok := o.misses[key]
	if ok && o.clock.Now().After(m.until) {
		delete(o.misses, key)
		return miss{}, false
	}
	return m, ok
}

func (o *OnDemand) remember(key missKey, err *practice.UnusableError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	if len(o.misses) >= maxMisses {
		for k, m := range o.misses {
			if now.After(m.until) {
				delete(o.misses, k)
			}
		}
		if len(o.misses) >= maxMisses {
			// Forgetting every miss costs reads, never a wrong answer.
			clear(o.misses)
		}
	}
	o.misses[key] = miss{until: now.Add(MissTTL), err: err}
}
