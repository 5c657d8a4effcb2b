package firms

import (
	"context"
	"slices"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// What the cluster asks of the runtime when instances share the firms
// (cluster.Firms): the cluster decides where each firm is held, and the
// runtime holds it here or lets go of it. A firm's models are held
// together, its connections' with its Caddyfile systems'.

// Placed are the firms with a read model to place: a Caddyfile system's,
// or a connection's open here.
func (r *Runtime) Placed() []string {
	var out []string
	for _, id := range r.order {
		if len(r.firms[id].models()) > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Size is what a firm's models hold in memory here.
func (r *Runtime) Size(id string) readmodel.Size {
	var s readmodel.Size
	f := r.firm(id)
	if f == nil {
		return s
	}
	for _, m := range f.models() {
		ms := m.Size()
		s.Records += ms.Records
		s.Bytes += ms.Bytes
	}
	return s
}

// Holds reports whether this instance holds the firm's models and runs
// their syncs: every instance does without a cluster.
func (r *Runtime) Holds(id string) bool {
	f := r.firm(id)
	return f != nil && f.holds()
}

// Held are the firms whose models this instance holds in memory: those
// the cluster holds here, or every firm with a model (its Caddyfile
// systems' or its connections') when every instance holds every firm.
func (r *Runtime) Held() []string {
	var out []string
	for _, id := range r.order {
		if f := r.firms[id]; f.holds() && len(f.models()) > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Hold loads a firm here, its connections' models with its own, and
// starts their syncs, which take the leases the previous holders let go
// of.
func (r *Runtime) Hold(ctx context.Context, id string) error {
	f := r.firm(id)
	if f == nil {
		return errNoFirm(id)
	}
	load := func() error {
		for _, m := range f.models() {
			if err := m.CatchUp(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	// Loaded first without holding up the connections' follow loop, then
	// caught up under it: the loop opens and closes connections, and runs
	// their syncs only where the firm is held.
	if err := load(); err != nil {
		return err
	}
	r.follow.mu.Lock()
	defer r.follow.mu.Unlock()
	if err := load(); err != nil {
		return err
	}
	f.held.Store(true)
	for _, s := range append(slices.Clone(f.systems), f.connections()...) {
		if s.syncsHere() && !s.running() {
			s.run()
		}
	}
	return nil
}

// Release stops a firm's syncs here (giving up their leases), its
// connections' too, and drops their records from memory.
func (r *Runtime) Release(id string) {
	f := r.firm(id)
	if f == nil {
		return
	}
	r.follow.mu.Lock()
	if !f.held.Swap(false) {
		r.follow.mu.Unlock()
		return
	}
	for _, c := range f.connections() {
		c.stop()
		c.model.Unload()
	}
	// The Caddyfile systems' syncs are waited for without holding up the
	// follow loop.
	var waits []func()
	for _, s := range f.systems {
		waits = append(waits, s.halt())
	}
	r.follow.mu.Unlock()
	for i, s := range f.systems {
		waits[i]()
		s.model.Unload()
	}
}

// Idle is a round of a firm not held here: a model loaded for a request
// no holder could take (store-served) is dropped, so that the bound is
// kept between requests; with follow, the checkpoints of its syncs are
// read, so that this instance reports them as their holder does.
func (r *Runtime) Idle(ctx context.Context, id string, follow bool) {
	f := r.firm(id)
	if f == nil {
		return
	}
	for _, m := range f.models() {
		m.Unload()
	}
	if !follow {
		return
	}
	for _, s := range f.systems {
		s.loadSyncs(ctx)
	}
	for _, c := range f.connections() {
		c.loadSyncs(ctx)
	}
}

// FromModel reports whether one of the firm's read models serves k here:
// what a holder answers, and so what is sent on to one.
func (r *Runtime) FromModel(id string, k practice.Kind) bool {
	f := r.firm(id)
	return f != nil && f.fromModel(k)
}
