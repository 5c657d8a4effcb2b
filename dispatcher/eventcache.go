package dispatcher

import "sync"

// recentEvents holds the events this engine recorded last, so that their
// first attempts, a moment later, need not read them back from the store
// (in the embedded mode that read was a sixth of an attempt's work). Events
// never change once recorded, so a hit is always right; a miss costs the
// read. It holds two generations of at most recentEventsMax each: when the
// newer fills, the older goes. An attempt follows its event's commit by
// milliseconds, so a few hundred cover thousands of changes a second.
type recentEvents struct {
	mu       sync.Mutex
	cur, old map[string]Event
}

const recentEventsMax = 256

func (r *recentEvents) keep(evs []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		if len(r.cur) >= recentEventsMax || r.cur == nil {
			r.old, r.cur = r.cur, make(map[string]Event, recentEventsMax)
		}
		r.cur[ev.ID] = ev
	}
}

func (r *recentEvents) get(id string) (Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev, ok := r.cur[id]; ok {
		return ev, true
	}
	ev, ok := r.old[id]
	return ev, ok
}
