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
	// Whatever happens to ctx, a finished attempt is recorded.
	storeCtx := context.WithoutCancel(ctx)

	m, err := e.message(ctx, c)
	switch {
	case errors.Is(err, errEndpointUnavailable):
		return e.finishUnattempted(storeCtx, c)
	case err != nil:
		e.handBack(storeCtx, c.Lease, time.Time{})
		return c.Delivery, err
	}
	reportToBreaker, err := allow()
	if err != nil {
		// The breaker opened or its probe started since the claim.
		e.handBack(storeCtx, c.Lease, e.now().Add(e.probeWait()))
		return c.Delivery, errHandedBack
	}
	if reportToBreaker == nil {
		reportToBreaker = func(error) {}
	}
	p, err := e.send(ctx, c.Delivery, m)
	if err != nil {
		// No answer to judge the endpoint by: the breaker does not count
		// the attempt and the delivery goes back.
		reportToBreaker(errUncounted)
		e.handBack(storeCtx, c.Lease, time.Time{})
		return c.Delivery, err
	}
	// The breaker hears of the answer and the endpoint's slot is free
	// before the bookkeeping: neither needs to wait for a store commit.
	reportToBreaker(breakerVerdict(p.res))
	if sent != nil {
		sent()
	}
	e.metrics.duration.Observe(p.elapsed.Seconds())
	return e.record(storeCtx, c, m.ep, trigger, p)
}

// errEndpointUnavailable means the delivery's endpoint is gone or
// disabled: the delivery fails without an attempt rather than going back.
var errEndpointUnavailable = errors.New("webhook endpoint gone or disabled")

// message is what an attempt sends, and where.
type message struct {
	ep   Endpoint
	ev   Event
	body []byte
}

// message loads the claimed delivery's endpoint and event and builds the
// body to send.
func (e *Engine) message(ctx context.Context, c Claim) (message, error) {
	d := c.Delivery
	ep, err := e.endpoint(ctx, d.EndpointID)
	switch {
	case errors.Is(err, ErrNotFound):
		return message{}, errEndpointUnavailable
	case err != nil:
		return message{}, fmt.Errorf("load endpoint %s: %w", d.EndpointID, err)
	case ep.Status != EndpointEnabled:
		// Nothing is sent to a disabled endpoint; its deliveries fail and
		// can be replayed in bulk once it is enabled again.
		return message{}, errEndpointUnavailable
	}
	ev, err := e.event(ctx, c)
	if err != nil {
		return message{}, fmt.Errorf("load event %s: %w", d.EventID, err)
	}
	body, err := ev.Envelope(d.Event)
	if err != nil {
		return message{}, err
	}
	return message{ep: ep, ev: ev, body: body}, nil
}

// posted is one request to an endpoint and its answer.
type posted struct {
	startedAt time.Time
	// elapsed is on the monotonic clock, whatever Clock says.
	elapsed time.Duration
	res     response
}

// send signs m and posts it to its endpoint. An error means there is no
// answer to record: signing failed, or shutdown cut the request short
// (errHandedBack) and nobody knows whether it arrived, so the delivery
// goes back for another attempt (receivers de-duplicate on the event id).
func (e *Engine) send(ctx context.Context, d Delivery, m message) (posted, error) {
	startedAt := e.now()
	header := http.Header{}
	if err := SignHeaders(header, m.ep.SigningKeys(startedAt), m.ev.ID, startedAt, m.body); err != nil {
		return posted{}, fmt.Errorf("sign delivery %s: %w", d.ID, err)
	}
	clock := time.Now()
	res := e.sender.post(ctx, m.ep.URL, header, m.body, startedAt)
	elapsed := time.Since(clock)
	if ctx.Err() != nil {
		return posted{}, errHandedBack
	}
	return posted{startedAt: startedAt, elapsed: elapsed, res: res}, nil
}

// record saves the attempt p and what it decides for the delivery. An
// endpoint that answered 410 Gone is disabled even when saving failed: it
// said it wants nothing more.
func (e *Engine) record(ctx context.Context, c Claim, ep Endpoint, trigger Trigger, p posted) (Delivery, error) {
	d := c.Delivery
	a := Attempt{
		Number:          len(d.Attempts) + 1,
		Trigger:         trigger,
		StartedAt:       p.startedAt,
		DurationMS:      p.elapsed.Milliseconds(),
		ResponseCode:    p.res.code,
		ResponseExcerpt: p.res.excerpt,
	}
	if p.res.err != nil {
		a.Error = p.res.err.Message
	}
	outcome := e.decide(d, a, p.res)
	saved, err := e.b.Attempts.RecordAttempt(ctx, c.Lease, outcome)
	if p.res.err != nil && p.res.err.Gone() {
		e.disable(ctx, ep.ID, fmt.Sprintf("The endpoint answered 410 Gone at %s (delivery %s).",
			p.startedAt.UTC().Format(time.RFC3339), d.ID))
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

// event is the claimed delivery's event, as the claim brought it, as this
// engine recorded it a moment ago, or read now.
func (e *Engine) event(ctx context.Context, c Claim) (Event, error) {
	if c.Event != nil && c.Event.ID == c.Delivery.EventID {
		return *c.Event, nil
	}
	if ev, ok := e.events.get(c.Delivery.EventID); ok {
		return ev, nil
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
		if n < maxAttempts {
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
