package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
)

const (
	// claimBatch bounds one claim transaction. Deliveries deferred by an
	// open breaker count towards it, so a dead endpoint with a long backlog
	// is pushed back in slices rather than in one huge transaction.
	claimBatch = 512
	// idleWait bounds how long the loop sleeps: a safety net for clock
	// jumps and for work another process queued without waking us.
	idleWait = 30 * time.Second
	// storeRetry is the pause after the store failed a claim.
	storeRetry = time.Second
)

// loop claims and starts due deliveries until ctx is cancelled. Ingest and
// finished attempts wake it through wakeC; otherwise it sleeps until the
// earliest scheduled attempt, so the happy path has no polling delay.
func (e *Engine) loop(ctx context.Context) {
	// Attempts outlive ctx by the shutdown grace: a request already sent is
	// worth finishing and recording.
	attemptCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	var workers sync.WaitGroup

	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for {
		wait := idleWait
		next, err := e.dispatchDue(attemptCtx, &workers)
		switch {
		case err != nil:
			e.log.Error("claiming due webhook deliveries failed", zap.Error(err))
			wait = storeRetry
		case !next.IsZero():
			wait = min(max(next.Sub(e.now()), 0), idleWait)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			e.shutdown(&workers, abort)
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

// dispatchDue claims what is due and can start now, starts it, and defers
// what an open breaker holds back. It returns when the next delivery falls
// due.
func (e *Engine) dispatchDue(ctx context.Context, workers *sync.WaitGroup) (time.Time, error) {
	e.mu.Lock()
	busy := e.inflight >= e.cfg.Workers
	e.mu.Unlock()
	if busy {
		// A finishing attempt wakes the loop; claiming now would only be a
		// write transaction that takes nothing.
		return time.Time{}, nil
	}
	now := e.now()
	// Decisions are per endpoint and per pass, so all of an endpoint's
	// deliveries in one claim are treated alike.
	deferUntil := map[string]time.Time{}
	decided := map[string]bool{}
	reserved := map[string]int{}
	accept := func(endpointID string) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		st := e.endpointLocked(endpointID)
		if !decided[endpointID] {
			decided[endpointID] = true
			if until, ok := e.deferral(st, now); ok {
				deferUntil[endpointID] = until
			}
		}
		if _, ok := deferUntil[endpointID]; ok {
			return true
		}
		if e.inflight >= e.cfg.Workers || st.inflight >= e.cfg.MaxInFlightPerEndpoint {
			return false
		}
		st.inflight++
		e.inflight++
		reserved[endpointID]++
		return true
	}
	claims, next, err := e.b.Queue.Claim(ctx, ClaimRequest{
		Now: now, LeaseUntil: now.Add(e.leaseFor), Max: claimBatch, Accept: accept,
	})
	if err != nil {
		e.unreserve(reserved)
		return time.Time{}, err
	}

	deferred := map[time.Time][]Lease{}
	for _, c := range claims {
		id := c.Delivery.EndpointID
		if until, ok := deferUntil[id]; ok {
			deferred[until] = append(deferred[until], c.Lease)
			continue
		}
		reserved[id]--
		workers.Add(1)
		go func() {
			defer workers.Done()
			defer e.finished(id)
			e.work(ctx, c)
		}()
	}
	// The store may claim fewer than Accept took (a record gone missing).
	e.unreserve(reserved)
	for until, leases := range deferred {
		if err := e.b.Queue.Release(ctx, leases, until); err != nil {
			// The leases expire by themselves; nothing is lost, only delayed.
			e.log.Error("deferring webhook deliveries behind an open circuit breaker failed", zap.Error(err))
		}
	}
	return next, nil
}

func (e *Engine) unreserve(reserved map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, n := range reserved {
		if n <= 0 {
			continue
		}
		st := e.endpointLocked(id)
		st.inflight -= n
		e.inflight -= n
		e.forgetLocked(id, st)
	}
}

// finished frees an attempt's slot and wakes the loop: a delivery held back
// by the endpoint's concurrency limit may start now.
func (e *Engine) finished(endpointID string) {
	e.unreserve(map[string]int{endpointID: 1})
	e.wake()
}

// work makes one attempt on a claimed delivery.
func (e *Engine) work(ctx context.Context, c Claim) {
	trigger := TriggerScheduled
	if c.Replay {
		trigger = TriggerReplay
	}
	_, err := e.attempt(ctx, c, trigger, true)
	switch {
	case err == nil, errors.Is(err, errHandedBack):
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrNotFound):
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
