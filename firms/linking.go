package firms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// A firm's ledger and document store name their records' clients through
// the firm's records system, whichever serves the firm's clients when
// they ask (its Caddyfile block's, or a connection made before or after
// them), so that a connected Xero names the connected Karbon's clients.
// Each asking system counts what it asked (its tally, in the sync's
// status). A client the records system gains later (created, renamed)
// may be the one an unlinked record stands for: the firm's ledger and
// document store that count unlinked candidates are then reconciled,
// at most once per relinkEvery each, so their records are mapped again
// and the links found change them (their version moves: the stamps of practice/stamps).

// relinkEvery spaces the reconciliations that look for links found
// later: a burst of new clients costs one full pass of each system, and
// a firm adding clients all day one an interval.
const relinkEvery = 10 * time.Minute

// firmLinker is a firm's records system as its other systems' linker.
type firmLinker struct{ f *firm }

func (l firmLinker) LinkClient(ctx context.Context, t practice.Tenant, c linking.Candidate) (linking.Link, error) {
	tb := l.f.table.Load()
	if tb == nil {
		return linking.Link{}, nil
	}
	src := tb.kinds[practice.Clients]
	if src.sys == nil {
		// Demo records, or no records system: no client to link.
		return linking.Link{}, nil
	}
	if src.sys.held || src.sys.paused() {
		// Unlinking every record while the records connection is
		// reconnected would change them all twice; the read is retried.
		return linking.Link{}, &practice.UnavailableError{Upstream: src.sys.label,
			Err: fmt.Errorf("the firm's records system is reconnecting")}
	}
	rl, ok := src.sys.opened.Reader.(linking.Linker)
	if !ok {
		return linking.Link{}, nil
	}
	later := practice.LaterOf(ctx)
	if later == nil {
		return rl.LinkClient(ctx, t, c)
	}
	// A first read (a ledger's backfill) does not queue behind the
	// records system's own sync for its allowance: a link it cannot have
	// at once is left for the read that follows the first one, which
	// waits its turn.
	link, err := rl.LinkClient(upstream.WithoutWaiting(ctx), t, c)
	if err != nil && errors.Is(err, practice.ErrUnavailable) && ctx.Err() == nil {
		later.Leave()
		return linking.Link{Outcome: linking.Later}, nil
	}
	return link, err
}

// linkerFor is the linker the firm's system in role asks through,
// counting into tally; nil for a records system, or when the firm turns
// linking off.
func (f *firm) linkerFor(role string, tally *linking.Tally) linking.Linker {
	if role == "records" || f.LinkClients == firmsystem.LinkOff {
		return nil
	}
	return linking.Counted{Linker: firmLinker{f}, Tally: tally}
}

// relinker is the firm's relinker, made once.
func (f *firm) relinker(r *Runtime) *relinker {
	f.relinkOnce.Do(func() {
		f.relink = &relinker{log: r.logger, f: f, last: map[*system]time.Time{}, timers: map[*system]*time.Timer{}}
	})
	return f.relink
}

// relinker asks a firm's systems that count unlinked candidates to
// reconcile when the records system gains a client.
type relinker struct {
	log *zap.Logger
	f   *firm

	mu     sync.Mutex
	last   map[*system]time.Time
	timers map[*system]*time.Timer
	closed bool
}

// clientsChanged is told of every change record of the firm's clients.
func (rl *relinker) clientsChanged(c practice.Change) {
	if c.Kind != practice.Clients || !namesChanged(c) {
		return
	}
	rl.recordsChanged(false)
}

// recordsOf is the system serving a table's clients, nil for none.
func recordsOf(t *table) *system {
	if t == nil {
		return nil
	}
	return t.kinds[practice.Clients].sys
}

// recordsChanged schedules the reconciliation of the firm's systems that
// may have records to link. started says the records system is the one
// this process found at its start (its first view of the firm's
// connections): the copies it loaded were linked against that system
// already, so only what this process counted unlinked is reconciled,
// not every system it has not read yet, which would read every ledger
// and document store in full at every restart.
func (rl *relinker) recordsChanged(started bool) {
	tb := rl.f.table.Load()
	var systems []*system
	for _, s := range rl.f.systems {
		systems = append(systems, s)
	}
	if tb != nil {
		for _, s := range tb.conns {
			systems = append(systems, s)
		}
	}
	for _, s := range systems {
		// A tally with nothing counted is of a system mapped elsewhere (its
		// sync's holder), which may count unlinked ones.
		if len(s.syncs) > 0 && mayLink(s.tally, started) {
			rl.schedule(s)
		}
	}
}

// mayLink reports whether a system counting into tally may have records a
// new records system links: some it counted unlinked, or, unless the
// records system is the one found at the start, none counted yet (its
// copy loaded, or its sync held elsewhere).
func mayLink(tally *linking.Tally, started bool) bool {
	if tally == nil {
		return false
	}
	return tally.Unlinked() > 0 || !started && tally.Counts().Candidates == 0
}

// namesChanged reports whether a client change may link a record: a
// client created, or one whose name or email changed.
func namesChanged(c practice.Change) bool {
	var after, before struct{ Name, Email string }
	if json.Unmarshal(c.After, &after) != nil || string(c.After) == "null" {
		return false
	}
	if len(c.Before) == 0 || string(c.Before) == "null" {
		return true
	}
	_ = json.Unmarshal(c.Before, &before)
	return before != after
}

// schedule reconciles s now, or relinkEvery after its last one.
func (rl *relinker) schedule(s *system) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.closed || rl.timers[s] != nil {
		return
	}
	wait := time.Until(rl.last[s].Add(relinkEvery))
	rl.timers[s] = time.AfterFunc(max(wait, 0), func() { rl.resync(s) })
}

func (rl *relinker) resync(s *system) {
	rl.mu.Lock()
	delete(rl.timers, s)
	if rl.closed {
		rl.mu.Unlock()
		return
	}
	rl.last[s] = time.Now()
	rl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sync := range s.syncs {
		if err := sync.Resync(ctx); err != nil {
			rl.log.Warn("reconciling to link clients found later", zap.String("firm", rl.f.ID),
				zap.String("system", s.name), zap.Error(err))
		}
	}
}

// close stops the reconciliations scheduled.
func (rl *relinker) close() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.closed = true
	for _, t := range rl.timers {
		t.Stop()
	}
	clear(rl.timers)
}

// watchedSink tells the relinker of the client changes a records system
// publishes, once they are durable.
type watchedSink struct {
	changes.ChangeSink
	rl *relinker
}

func (w watchedSink) Publish(ctx context.Context, c practice.Change) error {
	if err := w.ChangeSink.Publish(ctx, c); err != nil {
		return err
	}
	w.rl.clientsChanged(c)
	return nil
}

// links are s's tally for its status, nil when it asks for no clients.
func (s *system) links() *readmodel.Links {
	if s.tally == nil {
		return nil
	}
	c := s.tally.Counts()
	of := s.label + " customers"
	if s.opened.Customers != "" {
		of = s.label + " " + s.opened.Customers
	}
	if s.role == "documents" {
		of = "client folders in " + s.label
	}
	l := &readmodel.Links{Of: of, Candidates: c.Candidates, Linked: c.Linked, Missing: c.Missing, Ambiguous: c.Ambiguous}
	if s.f != nil {
		if tb := s.f.table.Load(); tb != nil {
			if rs := tb.kinds[practice.Clients].sys; rs != nil {
				l.In = rs.label
			}
		}
	}
	return l
}
