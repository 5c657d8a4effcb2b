package dispatcher

import (
	"context"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/internal/practice"
)

// Replay makes one attempt on a delivery now, outside the schedule, and
// returns the delivery with that attempt logged as a replay. The delivery
// ends delivered or failed; a replay of a delivery still retrying ends its
// schedule. ErrBusy if an attempt on it is in flight; ErrEndpointDisabled
// if its endpoint is disabled.
func (e *Engine) Replay(ctx context.Context, t practice.Tenant, deliveryID string) (Delivery, error) {
	d, err := e.GetDelivery(ctx, t, deliveryID)
	if err != nil {
		return Delivery{}, err
	}
	if err := e.replayable(ctx, d.EndpointID); err != nil {
		return Delivery{}, err
	}
	now := e.now()
	c, err := e.b.Attempts.Lease(ctx, deliveryID, now, now.Add(e.leaseFor))
	if err != nil {
		return Delivery{}, fmt.Errorf("replay %s: %w", deliveryID, err)
	}
	// The attempt runs to completion even if the caller hangs up: a request
	// already sent must be recorded.
	saved, err := e.attempt(context.WithoutCancel(ctx), c, TriggerReplay, false, nil)
	if err != nil {
		return Delivery{}, fmt.Errorf("replay %s: %w", deliveryID, err)
	}
	return saved, nil
}

// ReplayFailed queues one replay attempt for each of an endpoint's failed
// deliveries created at or after since, and returns how many. The delivery
// loop makes the attempts, within the endpoint's concurrency limit and
// behind its circuit breaker, so recovering from a long outage does not
// flood the receiver.
func (e *Engine) ReplayFailed(ctx context.Context, t practice.Tenant, endpointID string, since time.Time) (int, error) {
	if _, err := e.GetEndpoint(ctx, t, endpointID); err != nil {
		return 0, err
	}
	if err := e.replayable(ctx, endpointID); err != nil {
		return 0, err
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
		return ErrEndpointDisabled
	}
	return nil
}
