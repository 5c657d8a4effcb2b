package readmodel

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// A change record is published before the model keeps its state, so
// that a crash between the two loses no change (the state, not yet
// kept, is compared and published again). A receiver that reads the
// record on hearing of its change could then read the state before it:
// the dispatcher may deliver within the time the model takes to store
// the state. So the recorder tells the model of a state it is about to
// publish (changes.Announcer), and a read of that record, or a list of
// its kind, waits until the state is kept, for at most announceWait
// (the bound a read waits for the shared feed), as it would for another
// instance's write.

// announceWait bounds how long a read waits for a state being announced.
const announceWait = readSyncTimeout

// announcing are the records whose change is being published, by state
// key, with how many publications of each are under way.
type announcing struct {
	mu sync.Mutex
	m  map[string]*announced
}

type announced struct {
	n    int
	kept chan struct{}
}

// Announcing implements changes.Announcer: reads of key wait until done.
func (m *Model) Announcing(key string) (done func()) {
	a := &m.announcing
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*announced{}
	}
	e := a.m[key]
	if e == nil {
		e = &announced{kept: make(chan struct{})}
		a.m[key] = e
	}
	e.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if e.n--; e.n == 0 {
				delete(a.m, key)
				close(e.kept)
			}
		})
	}
}

// awaitAnnounced waits, for at most announceWait, until the states being
// announced of k (of id alone, unless id is empty) are kept.
func (m *Model) awaitAnnounced(ctx context.Context, t practice.Tenant, k practice.Kind, id string) {
	a := &m.announcing
	a.mu.Lock()
	var waits []chan struct{}
	if id != "" {
		if e := a.m[changes.StateKey(t, k, id)]; e != nil {
			waits = append(waits, e.kept)
		}
	} else {
		prefix := changes.StateKey(t, k, "")
		for key, e := range a.m {
			if strings.HasPrefix(key, prefix) {
				waits = append(waits, e.kept)
			}
		}
	}
	a.mu.Unlock()
	if len(waits) == 0 {
		return
	}
	timer := time.NewTimer(announceWait)
	defer timer.Stop()
	for _, kept := range waits {
		select {
		case <-kept:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
