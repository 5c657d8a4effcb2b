package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
)

const (
	// claimBatch bounds one claim: one store transaction or script.
	claimBatch = 256
	// storeRetry is the pause after the store failed a claim.
	storeRetry = time.Second
)

// loop claims and starts due deliveries until ctx is cancelled. Ingest and
// finished requests wake it through wakeC; otherwise it sleeps until the
// earliest scheduled attempt (or PollInterval), so the happy path has no
// polling delay.
func (e *Engine) loop(ctx context.Context) {
	// Attempts outlive ctx by the shutdown grace: a request already sent is
	// worth finishing and recording.
	attemptCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	var workers sync.WaitGroup

	e.mu.Lock()
	e.delivering = true
	e.mu.Unlock()
	timer := time.NewTimer(e.cfg.PollInterval)
	defer timer.Stop()
	for {
		wait := e.cfg.PollInterval
		next, err := e.dispatchDue(attemptCtx, &workers)
		switch {
		case err != nil:
			e.log.Error("claiming due webhook deliveries failed", zap.Error(err))
			wait = storeRetry
		case !next.IsZero():
			wait = min(max(next.Sub(e.now()), 0), e.cfg.PollInterval)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			handed := e.stopHandoffs()
			e.shutdown(&workers, abort)
			e.releaseReady(context.WithoutCancel(ctx), handed)
			return
		case <-e.wakeC:
		case <-timer.C:
		}
	}
}

// shutdown waits for in-flight attempts, aborting them after the grace
// period; aborted attempts hand their leases back themselves.
func (e *Engine) shutdown(workers *sync.WaitGroup, abort context.CancelFunc) {
	finished := make(chan struct{})
	go func() {
		workers.Wait()
		close(finished)
	}()
	grace := time.NewTimer(e.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-finished:
	case <-grace.C:
		abort()
		<-finished
	}
}

// dispatchDue starts the claims that have a slot now, claims what is due
// and has room, and starts what of it can start. It returns when the loop
// should look again at the latest.
func (e *Engine) dispatchDue(ctx context.Context, workers *sync.WaitGroup) (time.Time, error) {
	// Deliveries handed off by their writers' transactions first: their
	// slots are theirs already.
	e.start(ctx, workers, e.takeHanded())
	now := e.now()
	p := e.plan(now)
	e.start(ctx, workers, p.start)
	for until, leases := range p.drop {
		// Their endpoint's breaker opened while they waited for a slot.
		if err := e.b.Queue.Release(ctx, leases, until); err != nil {
			e.log.Warn("handing back deliveries to an endpoint with an open circuit breaker failed; they are retried when their leases expire",
				zap.Error(err))
		}
	}
	for _, s := range p.snoozes {
		if err := e.b.Queue.Snooze(ctx, s.endpointID, s.until); err != nil {
			// The endpoint stays passed over by this engine all the same;
			// only other dispatchers go on trying it meanwhile.
			e.log.Warn("pausing the deliveries of an endpoint with an open circuit breaker failed",
				zap.String("endpoint_id", s.endpointID), zap.Error(err))
			continue
		}
		e.snoozed(s)
	}
	if p.max <= 0 {
		// A finishing attempt wakes the loop; claiming now would only be a
		// store write that takes nothing.
		return p.reopen, nil
	}
	claims, next, err := e.b.Queue.Claim(ctx, ClaimRequest{
		Now: now, LeaseUntil: now.Add(e.leaseFor), Max: min(p.max, claimBatch),
		PerEndpoint: e.window(), Room: p.room, PerFirm: e.firmWindow(), FirmRoom: p.firmRoom,
	})
	if err != nil {
		return time.Time{}, err
	}
	e.start(ctx, workers, e.admit(claims))
	return earliest(next, p.reopen), nil
}

// start runs an attempt on each claim, each holding a slot of its
// endpoint (taken by plan or admit) until its request is answered.
func (e *Engine) start(ctx context.Context, workers *sync.WaitGroup, claims []Claim) {
	for _, c := range claims {
		slot := e.newSlot(c.Delivery)
		workers.Add(1)
		go func() {
			defer workers.Done()
			defer e.workerDone(slot)
			e.work(ctx, c, slot.release)
		}()
	}
}

// releaseReady hands back the claims still waiting for a slot, and those
// handed off and not started, on the way out: the next dispatcher need not
// wait for their leases.
func (e *Engine) releaseReady(ctx context.Context, handed []Lease) {
	e.mu.Lock()
	leases := handed
	for id, st := range e.endpoints {
		for _, c := range st.ready {
			leases = append(leases, c.Lease)
		}
		e.readyN -= len(st.ready)
		e.firmLocked(st.firm).ready -= len(st.ready)
		e.firmDoneLocked(st.firm)
		st.ready = nil
		e.forgetLocked(id, st)
	}
	e.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	if err := e.b.Queue.Release(ctx, leases, time.Time{}); err != nil {
		e.log.Warn("handing back claimed deliveries on shutdown failed; they are retried when their leases expire", zap.Error(err))
	}
}

// earliest is the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// slot is an attempt's hold on one of its endpoint's request slots. It is
// given back as soon as the request is answered, before the attempt is
// recorded: the slot protects the endpoint, which the bookkeeping does not
// load, and holding it through a store commit would cap an endpoint at
// slots per commit time.
type slot struct {
	e                *Engine
	endpointID, firm string
	once             sync.Once
}

func (e *Engine) newSlot(d Delivery) *slot {
	return &slot{e: e, endpointID: d.EndpointID, firm: d.Firm}
}

func (s *slot) release() {
	s.once.Do(func() {
		e := s.e
		e.mu.Lock()
		st := e.endpointLocked(s.endpointID)
		st.inflight--
		e.forgetLocked(s.endpointID, st)
		e.firmLocked(s.firm).inflight--
		e.firmDoneLocked(s.firm)
		e.mu.Unlock()
		// A delivery held back by the endpoint's limit may start now.
		e.wake()
	})
}

// workerDone frees an attempt's worker, and its endpoint slot if the
// attempt ended before sending.
func (e *Engine) workerDone(s *slot) {
	s.release()
	e.mu.Lock()
	e.inflight--
	e.mu.Unlock()
	e.wake()
}

// work makes one attempt on a claimed delivery; sent is called once the
// endpoint has answered.
func (e *Engine) work(ctx context.Context, c Claim, sent func()) {
	trigger := TriggerScheduled
	if c.Replay {
		trigger = TriggerReplay
	}
	_, err := e.attempt(ctx, c, trigger, e.endpointState(c.Delivery.EndpointID).breaker.Allow, sent)
	switch {
	case err == nil, errors.Is(err, errHandedBack):
	case errors.Is(err, practice.ErrLeaseLost), errors.Is(err, ErrNotFound):
		// Another dispatcher took over after our lease ran out, or the
		// endpoint was deleted with its deliveries meanwhile.
		e.log.Warn("webhook attempt not recorded", zap.String("delivery_id", c.Delivery.ID), zap.Error(err))
	default:
		e.log.Error("webhook attempt failed", zap.String("delivery_id", c.Delivery.ID), zap.Error(err))
	}
}

// handBack releases a lease unattempted; if that fails the lease simply
// expires.
func (e *Engine) handBack(ctx context.Context, l Lease, notBefore time.Time) {
	if err := e.b.Queue.Release(ctx, []Lease{l}, notBefore); err != nil {
		e.log.Warn("handing a webhook delivery back failed; it is retried when its lease expires",
			zap.String("delivery_id", l.DeliveryID), zap.Error(err))
	}
}
