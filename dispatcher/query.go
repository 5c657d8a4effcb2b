package dispatcher

import (
	"context"
	"fmt"
	"strings"

	"github.com/practicegw/practicegw/practice"
)

// ListEvents returns one page of a tenant's events, oldest first. Kinds may
// name the engagement_letter.signed alias, which finds engagement.signed.
func (e *Engine) ListEvents(ctx context.Context, q EventQuery) (EventPage, error) {
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return EventPage{}, err
	}
	q.Limit = limit
	kinds := make([]string, 0, len(q.Kinds))
	for _, k := range q.Kinds {
		k = canonicalKind(k)
		if !isKind(k) {
			return EventPage{}, practice.Invalid("event", "%q is not an event kind; use any of %s.", k, strings.Join(Kinds(), ", "))
		}
		kinds = append(kinds, k)
	}
	q.Kinds = kinds
	page, err := e.b.Events.Events(ctx, q)
	if err != nil {
		return EventPage{}, fmt.Errorf("list events: %w", err)
	}
	return page, nil
}

// GetEvent returns a tenant's event; another tenant's is not found.
func (e *Engine) GetEvent(ctx context.Context, t practice.Tenant, id string) (Event, error) {
	ev, err := e.b.Events.Event(ctx, id)
	if err != nil {
		return Event{}, fmt.Errorf("get event %s: %w", id, err)
	}
	if ev.Tenant() != t {
		return Event{}, fmt.Errorf("get event %s: %w", id, ErrNotFound)
	}
	return ev, nil
}

// ListDeliveries returns one page of a tenant's endpoint's deliveries,
// oldest first.
func (e *Engine) ListDeliveries(ctx context.Context, t practice.Tenant, q DeliveryQuery) (DeliveryPage, error) {
	if _, err := e.GetEndpoint(ctx, t, q.EndpointID); err != nil {
		return DeliveryPage{}, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return DeliveryPage{}, err
	}
	q.Limit = limit
	for _, s := range q.States {
		if !s.Valid() {
			return DeliveryPage{}, practice.Invalid("state", "%q is not a delivery state; use pending, retrying, delivered or failed.", s)
		}
	}
	page, err := e.b.Deliveries.Deliveries(ctx, q)
	if err != nil {
		return DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", q.EndpointID, err)
	}
	return page, nil
}

// GetDelivery returns a tenant's delivery with its attempts.
func (e *Engine) GetDelivery(ctx context.Context, t practice.Tenant, id string) (Delivery, error) {
	d, err := e.b.Deliveries.Delivery(ctx, id)
	if err != nil {
		return Delivery{}, fmt.Errorf("get delivery %s: %w", id, err)
	}
	if d.Tenant() != t {
		return Delivery{}, fmt.Errorf("get delivery %s: %w", id, ErrNotFound)
	}
	return d, nil
}

// checkLimit applies the collection page-size rule: default 50, 1..200,
// and anything outside is an error rather than a silent cap.
func checkLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultLimit, nil
	case n < 1 || n > MaxLimit:
		return 0, practice.Invalid("limit", "The limit must be between 1 and %d.", MaxLimit)
	}
	return n, nil
}
