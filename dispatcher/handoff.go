package dispatcher

import "github.com/sony/gobreaker/v2"

// A delivery queued in a writer's transaction (TxIntake) is handed to the
// delivery loop from memory when the engine can start it at once: its
// endpoint, its firm and the engine each have a request slot free, the
// endpoint's breaker is closed and none of its claims waits for a slot. The
// slot is taken inside the transaction, the delivery is stored leased to
// this engine rather than queued, and once the transaction commits the
// claim goes straight to the loop, which starts it: no claim, and so no
// commit, stands between the change and its request. A delivery the engine
// cannot start at once is queued as any other, and claimed when it can.
//
// Should the process die after the commit, the lease is what any lease is:
// the store queues the delivery again when it expires, or at once when the
// embedded store is next opened (bbolt is one process's file).

// handoff is the slots a writer's transaction took for its deliveries.
type handoff struct {
	e     *Engine
	taken []Delivery
}

// take reserves a request slot for d if it can start at once.
func (h *handoff) take(d Delivery) bool {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.delivering || e.inflight >= e.cfg.Workers {
		return false
	}
	st := e.endpointLocked(d.EndpointID)
	st.firm = d.Firm
	fl := e.firmLocked(d.Firm)
	if st.breaker.State() != gobreaker.StateClosed || len(st.ready) > 0 ||
		st.inflight >= e.cfg.MaxInFlightPerEndpoint || fl.inflight >= e.cfg.MaxInFlightPerFirm {
		e.forgetLocked(d.EndpointID, st)
		e.firmDoneLocked(d.Firm)
		return false
	}
	st.inflight++
	fl.inflight++
	e.inflight++
	h.taken = append(h.taken, d)
	return true
}

// cancel gives back every slot taken: the transaction was rolled back (to
// be run again) or failed.
func (h *handoff) cancel() {
	e := h.e
	e.mu.Lock()
	for _, d := range h.taken {
		st := e.endpointLocked(d.EndpointID)
		st.inflight--
		e.forgetLocked(d.EndpointID, st)
		e.firmLocked(d.Firm).inflight--
		e.firmDoneLocked(d.Firm)
		e.inflight--
	}
	e.mu.Unlock()
	h.taken = nil
	e.wake()
}

// hand gives the committed claims, whose slots are taken, to the loop.
// Claims the loop will no longer start (it stopped meanwhile) keep their
// leases until they expire.
func (h *handoff) hand(claims []Claim) {
	if len(claims) == 0 {
		return
	}
	e := h.e
	e.mu.Lock()
	if !e.delivering {
		e.mu.Unlock()
		h.cancel()
		return
	}
	e.handed = append(e.handed, claims...)
	e.mu.Unlock()
	e.wake()
}

// takeHanded returns the claims handed to the loop since it last looked.
func (e *Engine) takeHanded() []Claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.handed
	e.handed = nil
	return c
}

// stopHandoffs ends handoffs as the loop stops and returns the leases of
// the claims handed and not started, to give back with the ready ones.
func (e *Engine) stopHandoffs() []Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delivering = false
	var leases []Lease
	for _, c := range e.handed {
		leases = append(leases, c.Lease)
		st := e.endpointLocked(c.Delivery.EndpointID)
		st.inflight--
		e.forgetLocked(c.Delivery.EndpointID, st)
		e.firmLocked(c.Delivery.Firm).inflight--
		e.firmDoneLocked(c.Delivery.Firm)
		e.inflight--
	}
	e.handed = nil
	return leases
}
