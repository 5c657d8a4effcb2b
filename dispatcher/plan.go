package dispatcher

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// The engine leases up to twice as many of an endpoint's deliveries as it
// has request slots for it: the claims beyond its slots wait in memory
// (endpointState.ready) and start the moment a slot frees, with no store
// write in between. Claims are then topped up in chunks of at least half
// the slots, so that a busy endpoint costs a claim (a store write) per
// many requests rather than one per request. A delivery waits in memory at
// most about one attempt timeout, well inside its lease.

// window is how many of one endpoint's deliveries the engine holds at once,
// in flight and ready.
func (e *Engine) window() int { return 2 * e.cfg.MaxInFlightPerEndpoint }

// plan is one look at the engine's capacity, taken under its lock.
type plan struct {
	// start are ready claims given a slot now.
	start []Claim
	// drop are ready claims of endpoints whose breaker opened, to hand
	// back until it lets a probe through.
	drop map[time.Time][]Lease
	// room is how many more deliveries to claim of the endpoints it names
	// (others: a whole window).
	room map[string]int
	// firmRoom is the same for the firms it names (others: a whole firm
	// window).
	firmRoom map[string]int
	// max is how many more deliveries to claim in all.
	max int
	// snoozes are open breakers the store does not know of yet.
	snoozes []snooze
	// reopen is the earliest time an open breaker lets a probe through.
	reopen time.Time
}

// snooze asks the store to pause an endpoint whose breaker opened.
type snooze struct {
	endpointID string
	until      time.Time
	openedAt   int64
}

// plan starts what is ready and works out what to claim. Attempts only
// ever finish meanwhile, so the claim that follows may take a little less
// than there is room for, never more.
func (e *Engine) plan(now time.Time) plan {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := plan{room: make(map[string]int), firmRoom: make(map[string]int), drop: make(map[time.Time][]Lease)}
	for id, st := range e.endpoints {
		fl := e.firmLocked(st.firm)
		slots, limit := e.cfg.MaxInFlightPerEndpoint, e.window()
		switch st.breaker.State() {
		case gobreaker.StateOpen:
			slots, limit = 0, 0
			opened := st.openedAt.Load()
			until := now.Add(max(e.cfg.BreakerCooldown-time.Since(time.Unix(0, opened)), 0))
			p.reopen = earliest(p.reopen, until)
			if st.snoozedFor != opened {
				p.snoozes = append(p.snoozes, snooze{endpointID: id, until: until, openedAt: opened})
			}
			for _, c := range st.ready {
				p.drop[until] = append(p.drop[until], c.Lease)
			}
			e.readyN -= len(st.ready)
			fl.ready -= len(st.ready)
			st.ready = nil
		case gobreaker.StateHalfOpen:
			// One probe at a time decides whether the endpoint is back.
			slots, limit = 1, 1
		}
		for len(st.ready) > 0 && st.inflight < slots && fl.inflight < e.cfg.MaxInFlightPerFirm && e.inflight < e.cfg.Workers {
			p.start = append(p.start, st.ready[0])
			st.ready = st.ready[1:]
			st.inflight++
			fl.inflight++
			fl.ready--
			e.inflight++
			e.readyN--
		}
		want := limit - st.inflight - len(st.ready)
		if want < min(max(e.cfg.MaxInFlightPerEndpoint/2, 1), limit) {
			want = 0
		}
		if want != e.window() {
			p.room[id] = want
		}
		e.forgetLocked(id, st)
	}
	for firm, fl := range e.firms {
		// A firm at its bound is claimed no more than it can start soon:
		// its other due deliveries stay in the store, unleased, and other
		// firms' are claimed instead.
		if want := max(e.firmWindow()-fl.inflight-fl.ready, 0); want != e.firmWindow() {
			p.firmRoom[firm] = want
		}
		e.firmDoneLocked(firm)
	}
	p.max = 2*e.cfg.Workers - e.inflight - e.readyN
	return p
}

// admit gives each new claim a slot if its endpoint has one free, and
// keeps the rest ready; it returns those to start.
func (e *Engine) admit(claims []Claim) []Claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	var start []Claim
	for _, c := range claims {
		st := e.endpointLocked(c.Delivery.EndpointID)
		st.firm = c.Delivery.Firm
		fl := e.firmLocked(st.firm)
		slots := e.cfg.MaxInFlightPerEndpoint
		switch st.breaker.State() {
		case gobreaker.StateOpen:
			slots = 0
		case gobreaker.StateHalfOpen:
			slots = 1
		}
		if len(st.ready) == 0 && st.inflight < slots && fl.inflight < e.cfg.MaxInFlightPerFirm && e.inflight < e.cfg.Workers {
			st.inflight++
			fl.inflight++
			e.inflight++
			start = append(start, c)
			continue
		}
		st.ready = append(st.ready, c)
		fl.ready++
		e.readyN++
	}
	return start
}

// snoozed notes that the store knows of s's breaker opening.
func (e *Engine) snoozed(s snooze) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st, ok := e.endpoints[s.endpointID]; ok {
		st.snoozedFor = s.openedAt
	}
}
