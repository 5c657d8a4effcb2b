package dispatcher

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"
)

// endpointState is this process's view of one endpoint: attempts in flight
// and its circuit breaker. It is rebuilt from nothing after a restart; a
// shared breaker (gobreaker's distributed variant over Redis) can replace
// it when several dispatchers share the work.
type endpointState struct {
	firm     string // whose endpoint it is, from its first claim
	inflight int    // requests in flight; guarded by Engine.mu
	// ready are claims waiting for a slot, oldest first (plan.go).
	// Guarded by Engine.mu.
	ready []Claim
	// snoozedFor is the openedAt of the breaker opening the store was told
	// of (Snooze), so that it is told once per opening. Guarded by
	// Engine.mu.
	snoozedFor int64
	breaker    *gobreaker.TwoStepCircuitBreaker[struct{}]
	// openedAt is when the breaker last opened, in wall-clock nanoseconds
	// (the breaker keeps wall time, whatever the engine's clock). Atomic
	// because the breaker reports state changes under its own lock.
	openedAt atomic.Int64
}

// errUncounted marks an attempt that says nothing about the endpoint's
// health (aborted by shutdown, never sent): the breaker ignores it.
var errUncounted = errors.New("attempt not counted")

func (e *Engine) newEndpointState(id string) *endpointState {
	st := &endpointState{}
	threshold := uint32(e.cfg.BreakerFailures)
	st.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        id,
		MaxRequests: 1,
		Timeout:     e.cfg.BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		OnStateChange: func(name string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				st.openedAt.Store(time.Now().UnixNano())
			}
			e.log.Info("webhook endpoint circuit breaker changed state",
				zap.String("endpoint_id", name), zap.String("from", from.String()), zap.String("to", to.String()))
		},
		IsExcluded: func(err error) bool { return errors.Is(err, errUncounted) },
	})
	return st
}

// endpointLocked returns the endpoint's state, creating it; e.mu is held.
func (e *Engine) endpointLocked(id string) *endpointState {
	st, ok := e.endpoints[id]
	if !ok {
		st = e.newEndpointState(id)
		e.endpoints[id] = st
	}
	return st
}

func (e *Engine) endpointState(id string) *endpointState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.endpointLocked(id)
}

// probeWait is how long deliveries wait while a half-open breaker's probe
// is in flight. Short, because a probe that answers quickly should not hold
// the endpoint's backlog for long; a probe that times out costs each waiting
// delivery one re-check a second.
func (e *Engine) probeWait() time.Duration { return min(e.cfg.Timeout, time.Second) }

// breakerVerdict is what the breaker is told about an attempt: only an
// unhealthy endpoint counts as a failure.
func breakerVerdict(r response) error {
	if r.err != nil && r.err.Unhealthy {
		return r.err
	}
	return nil
}

// forget drops an idle endpoint's state once it holds nothing worth
// keeping, so the map does not grow with every endpoint ever seen. e.mu is
// held.
func (e *Engine) forgetLocked(id string, st *endpointState) {
	if st.inflight == 0 && len(st.ready) == 0 && st.breaker.State() == gobreaker.StateClosed && st.breaker.Counts().ConsecutiveFailures == 0 {
		delete(e.endpoints, id)
	}
}

// firmLoad is what the engine holds of one firm's deliveries: requests in
// flight, and claims waiting for a slot. Guarded by Engine.mu.
type firmLoad struct {
	inflight, ready int
}

// firmLocked returns the firm's load, creating it; e.mu is held.
func (e *Engine) firmLocked(firm string) *firmLoad {
	f, ok := e.firms[firm]
	if !ok {
		f = &firmLoad{}
		e.firms[firm] = f
	}
	return f
}

// firmDoneLocked forgets a firm the engine holds nothing of; e.mu is held.
func (e *Engine) firmDoneLocked(firm string) {
	if f, ok := e.firms[firm]; ok && f.inflight == 0 && f.ready == 0 {
		delete(e.firms, firm)
	}
}

// firmWindow is how many of one firm's deliveries the engine holds at once,
// in flight and ready, as window is for an endpoint.
func (e *Engine) firmWindow() int { return 2 * e.cfg.MaxInFlightPerFirm }
