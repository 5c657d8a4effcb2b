package dispatcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/practicegw/practicegw/internal/gcra"
	"github.com/practicegw/practicegw/practice"
)

// Replay makes one attempt on a delivery now, outside the schedule, and
// returns the delivery with that attempt logged as a replay. The delivery
// ends delivered or failed; a replay of a delivery still retrying ends its
// schedule. ErrBusy if an attempt on it is in flight; ErrEndpointDisabled
// if its endpoint is disabled.
//
// A replay is bounded as the delivery loop's attempts are: it takes one of
// the endpoint's request slots and one of the firm's, and passes the
// endpoint's circuit breaker (its answer counts there too); when one says
// no it is a *HeldBackError, so that a script cannot aim a flood of
// replays at a host that is failing or already busy.
func (e *Engine) Replay(ctx context.Context, t practice.Tenant, deliveryID string) (Delivery, error) {
	d, err := e.GetDelivery(ctx, t, deliveryID)
	if err != nil {
		return Delivery{}, err
	}
	if err := e.replayable(ctx, d.EndpointID); err != nil {
		return Delivery{}, err
	}
	s, report, err := e.replaySlot(d)
	if err != nil {
		return Delivery{}, err
	}
	defer s.release()
	// The breaker hears of every permission it gave: a replay that never
	// sent (leased elsewhere meanwhile) says nothing of the endpoint.
	var once sync.Once
	tell := func(verdict error) { once.Do(func() { report(verdict) }) }
	defer tell(errUncounted)

	now := e.now()
	c, err := e.b.Attempts.Lease(ctx, deliveryID, now, now.Add(e.leaseFor))
	if err != nil {
		return Delivery{}, fmt.Errorf("replay %s: %w", deliveryID, err)
	}
	// The attempt runs to completion even if the caller hangs up: a request
	// already sent must be recorded.
	allowed := func() (func(error), error) { return tell, nil }
	saved, err := e.attempt(context.WithoutCancel(ctx), c, TriggerReplay, allowed, s.release)
	if err != nil {
		return Delivery{}, fmt.Errorf("replay %s: %w", deliveryID, err)
	}
	return saved, nil
}

// replaySlot takes a request slot of d's endpoint and of its firm, and the
// endpoint breaker's permission, as the delivery loop's plan does for a
// claim; or says which bound holds the replay back.
func (e *Engine) replaySlot(d Delivery) (*slot, func(error), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.endpointLocked(d.EndpointID)
	st.firm = d.Firm
	fl := e.firmLocked(d.Firm)
	refuse := func(reason string, retry time.Duration) (*slot, func(error), error) {
		e.forgetLocked(d.EndpointID, st)
		e.firmDoneLocked(d.Firm)
		return nil, nil, &practice.HeldBackError{Reason: reason, RetryAfter: max(retry, time.Second)}
	}
	slots := e.cfg.MaxInFlightPerEndpoint
	switch st.breaker.State() {
	case gobreaker.StateOpen:
		opened := time.Unix(0, st.openedAt.Load())
		return refuse("The endpoint failed repeatedly and its circuit breaker is open; replay once it has cooled down.",
			e.cfg.BreakerCooldown-time.Since(opened))
	case gobreaker.StateHalfOpen:
		slots = 1
	}
	if st.inflight >= slots {
		return refuse(fmt.Sprintf("The endpoint has as many requests in flight as it may (%d); replay when one has finished.", slots), time.Second)
	}
	if fl.inflight >= e.cfg.MaxInFlightPerFirm {
		return refuse(fmt.Sprintf("This firm's endpoints have as many requests in flight as they may (%d); replay when one has finished.",
			e.cfg.MaxInFlightPerFirm), time.Second)
	}
	report, err := st.breaker.Allow()
	if err != nil {
		// Half open, its one probe already in flight.
		return refuse("The endpoint is being probed after repeated failures; replay when the probe has answered.", e.probeWait())
	}
	st.inflight++
	fl.inflight++
	return e.newSlot(d), report, nil
}

// ReplayFailed queues one replay attempt for each of an endpoint's failed
// deliveries created at or after since, and returns how many. The delivery
// loop makes the attempts, within the endpoint's concurrency limit and
// behind its circuit breaker, so recovering from a long outage does not
// flood the receiver. A firm may ask BulkReplaysPerMinute times a minute
// (shared by every gateway through ReplayBudget); past that it is a
// *HeldBackError.
func (e *Engine) ReplayFailed(ctx context.Context, t practice.Tenant, endpointID string, since time.Time) (int, error) {
	if _, err := e.GetEndpoint(ctx, t, endpointID); err != nil {
		return 0, err
	}
	if err := e.replayable(ctx, endpointID); err != nil {
		return 0, err
	}
	wait, err := e.cfg.ReplayBudget.Take(ctx, "replay_failed:"+t.Firm, e.cfg.BulkReplaysPerMinute, time.Minute)
	if err != nil {
		return 0, fmt.Errorf("replay failed deliveries of %s: counting the firm's bulk replays: %w", endpointID, err)
	}
	if wait > 0 {
		return 0, &practice.HeldBackError{RateLimited: true, RetryAfter: max(wait, time.Second),
			Reason: fmt.Sprintf("This firm has asked for %d bulk replays in the last minute, as many as it may; try again later.", e.cfg.BulkReplaysPerMinute)}
	}
	n, err := e.b.Attempts.RequeueFailed(ctx, endpointID, since, e.now())
	if err != nil {
		return 0, fmt.Errorf("replay failed deliveries of %s: %w", endpointID, err)
	}
	if n > 0 {
		e.wake()
	}
	return n, nil
}

func (e *Engine) replayable(ctx context.Context, endpointID string) error {
	ep, err := e.b.Endpoints.Endpoint(ctx, endpointID)
	if err != nil {
		return fmt.Errorf("load endpoint %s: %w", endpointID, err)
	}
	if ep.Status != EndpointEnabled {
		return practice.ErrEndpointDisabled
	}
	return nil
}

// ReplayBudget counts a firm's bulk replays: the vendor budgets' GCRA
// (adapters/kit/upstream.Budget, in process or in Redis) serves. Take books
// one at now unless limit per window are booked already, and then says
// how long until one would fit, booking nothing.
type ReplayBudget interface {
	Take(ctx context.Context, key string, limit int, per time.Duration) (wait time.Duration, err error)
}

// localBudget is a ReplayBudget in this process, on the engine's clock.
type localBudget struct {
	now  func() time.Time
	mu   sync.Mutex
	tats map[string]int64
}

func (b *localBudget) Take(_ context.Context, key string, limit int, per time.Duration) (time.Duration, error) {
	c := gcra.Cell{Interval: int64(per / time.Duration(max(limit, 1))), Tolerance: int64(per)}
	now := b.now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	next, r := c.Step(b.tats[key], now)
	b.tats[key] = next
	// Firms idle for a window hold nothing worth keeping.
	if len(b.tats) > 1000 {
		for k, t := range b.tats {
			if t < now {
				delete(b.tats, k)
			}
		}
	}
	return time.Duration(r.RetryAfter), nil
}
