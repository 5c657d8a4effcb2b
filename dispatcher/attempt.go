package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// errHandedBack means the delivery went back to the queue without an
// attempt (breaker open, shutdown, a store hiccup); it is not a failure.
var errHandedBack = errors.New("delivery handed back unattempted")

// attempt makes one attempt on a leased delivery and records it. allow
// asks the endpoint's circuit breaker for the attempt and returns what to
// tell it of the answer: the delivery loop asks here, a single replay has
// asked before leasing and passes its answer on. sent, if set, is called
// once the endpoint has answered (or failed to), before the attempt is
// recorded.
func (e *Engine) attempt(ctx context.Context, c Claim, trigger Trigger, allow func() (func(error), error), sent func()) (Delivery, error) {
	d := c.Delivery
	// Whatever happens to ctx, a finished attempt is recorded.
	storeCtx := context.WithoutCancel(ctx)

	ep, err := e.endpoint(ctx, d.EndpointID)
	switch {
	case errors.Is(err, ErrNotFound):
		return e.finishUnattempted(storeCtx, c)
	case err != nil:
		e.handBack(storeCtx, c.Lease, time.Time{})
		return d, fmt.Errorf("load endpoint %s: %w", d.EndpointID, err)
	case ep.Status != EndpointEnabled:
		// Nothing is sent to a disabled endpoint; its deliveries fail and
		// can be replayed in bulk once it is enabled again.
		return e.finishUnattempted(storeCtx, c)
	}
	ev, err := e.event(ctx, c)
	if err != nil {
		e.handBack(storeCtx, c.Lease, time.Time{})
		return d, fmt.Errorf("load event %s: %w", d.EventID, err)
	}
	body, err := ev.Envelope(d.Event)
	if err != nil {
		e.handBack(storeCtx, c.Lease, time.Time{})
		return d, err
	}

	reportToBreaker, err := allow()
	if err != nil {
		// The breaker opened or its probe started since the claim.
		e.handBack(storeCtx, c.Lease, e.now().Add(e.probeWait()))
		return d, errHandedBack
	}

	startedAt := e.now()
	header := http.Header{}
	if err := SignHeaders(header, ep.SigningKeys(startedAt), ev.ID, startedAt, body); err != nil {
		if reportToBreaker != nil {
			reportToBreaker(errUncounted)
		}
		e.handBack(storeCtx, c.Lease, time.Time{})
		return d, fmt.Errorf("sign delivery %s: %w", d.ID, err)
	}
	clock := time.Now() // durations on the monotonic clock, whatever Clock says
	res := e.sender.post(ctx, ep.URL, header, body, startedAt)
	elapsed := time.Since(clock)

	if ctx.Err() != nil {
		// Shutdown cut the request short; nobody knows whether it arrived,
		// so the delivery goes back for another attempt (receivers
		// de-duplicate on the event id).
		if reportToBreaker != nil {
			reportToBreaker(errUncounted)
		}
		e.handBack(storeCtx, c.Lease, time.Time{})
		return d, errHandedBack
	}

	// The breaker hears of the answer and the endpoint's slot is free
	// before the bookkeeping: neither needs to wait for a store commit.
	if reportToBreaker != nil {
		reportToBreaker(breakerVerdict(res))
	}
	if sent != nil {
		sent()
	}
	e.metrics.duration.Observe(elapsed.Seconds())

	a := Attempt{
		Number:          len(d.Attempts) + 1,
		Trigger:         trigger,
		StartedAt:       startedAt,
		DurationMS:      elapsed.Milliseconds(),
		ResponseCode:    res.code,
		ResponseExcerpt: res.excerpt,
	}
	if res.err != nil {
		a.Error = res.err.Message
	}
	outcome := e.decide(d, a, res)
	saved, err := e.b.Attempts.RecordAttempt(storeCtx, c.Lease, outcome)
	if res.err != nil && res.err.Gone() {
		e.disable(storeCtx, ep.ID, fmt.Sprintf("The endpoint answered 410 Gone at %s (delivery %s).",
			startedAt.UTC().Format(time.RFC3339), d.ID))
	}
	if err != nil {
		return d, fmt.Errorf("record attempt %d on %s: %w", a.Number, d.ID, err)
	}
	e.metrics.outcomes.WithLabelValues(string(outcome.State)).Inc()
	e.log.Debug("webhook attempt",
		zap.String("delivery_id", d.ID), zap.String("endpoint_id", d.EndpointID), zap.String("event_id", d.EventID),
		zap.String("attempt", a.Label()), zap.Int("response_code", a.ResponseCode), zap.String("state", string(saved.State)))
	return saved, nil
}

// event is the claimed delivery's event, as the claim brought it or read
// now.
func (e *Engine) event(ctx context.Context, c Claim) (Event, error) {
	if c.Event != nil && c.Event.ID == c.Delivery.EventID {
		return *c.Event, nil
	}
	return e.b.Events.Event(ctx, c.Delivery.EventID)
}

// decide moves the delivery on after attempt a.
func (e *Engine) decide(d Delivery, a Attempt, res response) Outcome {
	now := e.now()
	o := Outcome{Attempt: &a, At: now, State: StateFailed}
	switch {
	case res.err == nil:
		o.State = StateDelivered
	case a.Trigger == TriggerReplay, !res.err.Retriable:
		// A replay is one attempt outside the schedule and leaves the
		// delivery final either way.
	default:
		n := d.ScheduledAttempts() + 1
		if n < MaxAttempts {
			o.State = StateRetrying
			o.NextAttemptAt = now.Add(max(e.schedule.Delay(n), res.retryAfter))
		}
	}
	return o
}

// finishUnattempted fails a delivery whose endpoint is gone or disabled.
func (e *Engine) finishUnattempted(ctx context.Context, c Claim) (Delivery, error) {
	saved, err := e.b.Attempts.RecordAttempt(ctx, c.Lease, Outcome{State: StateFailed, At: e.now()})
	if err != nil {
		return c.Delivery, fmt.Errorf("fail delivery %s to an unavailable endpoint: %w", c.Delivery.ID, err)
	}
	return saved, nil
}

// disable turns an endpoint off, recording why.
func (e *Engine) disable(ctx context.Context, endpointID, reason string) {
	defer e.forgetEndpoint(endpointID)
	_, err := e.b.Endpoints.UpdateEndpoint(ctx, endpointID, func(ep *Endpoint) error {
		ep.Status = EndpointDisabled
		ep.DisabledReason = reason
		ep.UpdatedAt = e.now()
		return nil
	})
	if err != nil {
		e.log.Error("disabling a webhook endpoint failed", zap.String("endpoint_id", endpointID), zap.Error(err))
		return
	}
	e.log.Warn("webhook endpoint disabled", zap.String("endpoint_id", endpointID), zap.String("reason", reason))
}
