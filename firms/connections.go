package firms

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// Connections are a firm's systems connected by its administrator rather
// than named in the Caddyfile. They live in the store, so every instance
// follows it: each one opens, syncs, pauses and drops the systems the
// store's connections name, within a poll of any instance changing one. A
// role the firm's Caddyfile block serves is never served by a connection.

// follow is the state of the runtime's following of the connections.
type follow struct {
	// mu orders the follow loop, the purges and the cluster's holding
	// and letting go of firms.
	mu sync.Mutex
	// wake asks the loop to look now.
	wake chan struct{}
	// purged are the connections purged here.
	purged map[string]bool
	// known is the store's last list, for probes and metrics.
	known atomic.Pointer[[]connection.Connection]
	// failed is why each connection's system last failed to open, so
	// that the log says it once rather than every look.
	failed map[string]string
}

func newFollow() *follow {
	return &follow{wake: make(chan struct{}, 1), purged: map[string]bool{}, failed: map[string]string{}}
}

// failedAgain reports whether c's system failed to open as it did at
// the last look; the caller holds mu.
func (f *follow) failedAgain(c connection.Connection, err error) bool {
	key := fmt.Sprintf("%s/%d", c.ID, c.Attempt)
	again := f.failed[key] == err.Error()
	f.failed[key] = err.Error()
	return again
}

// followEvery is how often an instance reads the store's connections.
const followEvery = 500 * time.Millisecond

// roles are the roles a connection plays, records first: a ledger's
// invoices may fall back to a records system that keeps them.
var roles = []string{"records", "ledger", "documents"}

// paused reports whether the connection waits for its administrator:
// needs_reconnect, or a reconnect under way. Its copy is served failing.
func (s *system) paused() bool {
	return s.conn != nil && s.current.Load().Status != connection.Connected
}

// waitReason is why a paused connection waits for its administrator, in
// the gateway's words (the connection's reason), never the vendor's.
func (s *system) waitReason() string {
	if why := s.current.Load().Reason; why != "" {
		return why
	}
	return "the connection waits to be reconnected"
}

// syncsHere reports whether s's syncs should run where its firm is held:
// it is open as a system (not a held copy) and connected.
func (s *system) syncsHere() bool {
	return !s.held && (s.conn == nil || s.current.Load().Status == connection.Connected)
}

// wanted is what the store says a firm's role should be served by: its
// newest connection, nil when it has none.
type wanted struct{ conn *connection.Connection }

// serving is how the role's newest connection serves it.
type serving int

const (
	// servedByNone: no connection was ever made.
	servedByNone serving = iota
	// servedNotConnected: disconnected, or its first consent not given.
	servedNotConnected
	// servedBySystem: connected (its sync runs) or needs_reconnect (its
	// sync is paused): the system is open.
	servedBySystem
	// servedByHeldCopy: a reconnect under way (pending, choose_tenant
	// after it had connected): the copy is served, no system is open.
	servedByHeldCopy
)

func (w wanted) serving() serving {
	switch {
	case w.conn == nil:
		return servedByNone
	case w.conn.Live():
		return servedBySystem
	case w.conn.Status == connection.Disconnected || w.conn.ConnectedAt == nil:
		return servedNotConnected
	}
	return servedByHeldCopy
}

// open reports whether the role is served by what its connection opens
// here: its system or its held copy.
func (h serving) open() bool { return h == servedBySystem || h == servedByHeldCopy }

// wantedConnections reads the store's connections, oldest first, into
// what each firm's roles want. A role has at most one connection that is
// not disconnected (the connections manager refuses another), so the
// newest decides.
func wantedConnections(list []connection.Connection) map[string]map[string]wanted {
	out := map[string]map[string]wanted{}
	for i := range list {
		c := &list[i]
		if out[c.Firm] == nil {
			out[c.Firm] = map[string]wanted{}
		}
		out[c.Firm][c.Role] = wanted{conn: c}
	}
	return out
}

// followConnections brings this instance in line with the store's
// connections every tick, and at once when woken (a grant refused here).
func (r *Runtime) followConnections(ctx context.Context, tick <-chan time.Time) {
	said := ""
	for {
		err := r.applyConnections(ctx)
		if err != nil && ctx.Err() == nil && err.Error() != said {
			// Once per cause, not every look while the store is down.
			r.logger.Warn("connections not followed; trying again", zap.Error(err))
		}
		if said = ""; err != nil {
			said = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-r.follow.wake:
		}
	}
}

// wakeFollower asks the follow loop to look now.
func (r *Runtime) wakeFollower() {
	select {
	case r.follow.wake <- struct{}{}:
	default:
	}
}

// applyConnections is one look at the store: every firm's roles that its
// Caddyfile block leaves unset are served by their live connection,
// opened (again, when its attempt or organisation changed: a reconnect's
// new token or organisation), running or paused as its status says; a
// connection no longer live is closed.
func (r *Runtime) applyConnections(ctx context.Context) error {
	if r.d.Connections == nil {
		return nil
	}
	// The list is read under the lock: a look that read it earlier must
	// not apply an older list over a newer one (run a sync just paused).
	r.follow.mu.Lock()
	defer r.follow.mu.Unlock()
	list, err := r.d.Connections.Connections(ctx, "")
	if err != nil {
		return err
	}
	r.follow.known.Store(&list)
	want := wantedConnections(list)
	var errs []error
	for _, id := range r.order {
		if err := r.applyFirm(ctx, r.firms[id], want[id]); err != nil {
			errs = append(errs, fmt.Errorf("firm %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// applyFirm brings one firm's connections in line with want; the caller
// holds follow.mu.
func (r *Runtime) applyFirm(ctx context.Context, f *firm, want map[string]wanted) error {
	cur := f.table.Load()
	next := newTable()
	next.engagements = r.engagementsRole(f, want)
	var closing []*system
	var errs []error
	for _, role := range roles {
		if f.serves(role) {
			// The Caddyfile's system serves the role (XPM's invoices
			// for a firm that names no ledger among them): two syncs of
			// one kind would write one copy.
			continue
		}
		w := want[role]
		how := w.serving()
		if how != servedByNone && r.follow.purged[w.conn.ID] {
			// Purged here while the store still said otherwise: never
			// opened again.
			how = servedNotConnected
		}
		open := cur.conns[role]
		kinds := f.connKinds(role, next.engagements)
		if open != nil && (!how.open() || !sameOpening(open, *w.conn, how, kinds)) {
			closing = append(closing, open)
			open = nil
		}
		switch how {
		case servedByNone:
			continue
		case servedNotConnected:
			next.unserved[role] = notConnected(role)
			continue
		}
		if open == nil {
			var err error
			if open, err = r.openFor(ctx, f, *w.conn, how, kinds); err != nil {
				next.unserved[role] = notOpened(role)
				if !r.follow.failedAgain(*w.conn, err) {
					errs = append(errs, fmt.Errorf("%s %s: %w", role, w.conn.System, err))
				}
				continue
			}
		}
		r.keepUp(f, open, *w.conn)
		next.conns[role] = open
	}
	// Requests take the new table before the old systems stop.
	before := f.table.Load()
	after := f.decide(next, true)
	f.table.Store(after)
	if recordsOf(before) != recordsOf(after) {
		// Another records system (one connected, or its connection
		// opened again): what the others could not link may link now.
		// The first table that follows the connections is this
		// process's start, not a change of the firm's records system.
		f.relinker(r).recordsChanged(!before.followed)
	}
	return errors.Join(append(errs, r.closeAll(ctx, closing, want)...)...)
}

// openFor opens c as how serves it: its system, or its held copy.
func (r *Runtime) openFor(ctx context.Context, f *firm, c connection.Connection, how serving, kinds []practice.Kind) (*system, error) {
	if how == servedByHeldCopy {
		return r.holdCopy(ctx, f, c, kinds)
	}
	return r.openConnection(ctx, f, c, kinds)
}

// keepUp brings an open connection's syncs in line with c, its status in
// the store: paused unless connected, run only where the firm is held.
func (r *Runtime) keepUp(f *firm, open *system, c connection.Connection) {
	if err := keepStageMap(open, c); err != nil {
		// The Manager checked it before writing it.
		r.logger.Warn("stage map not applied", zap.String("connection", c.ID), zap.Error(err))
	}
	open.current.Store(&c)
	switch {
	case c.Status != connection.Connected:
		pause(open)
	case !f.holds():
		// Synced where the firm is held.
		open.stop()
	case !open.running():
		open.run()
	}
}

// closeAll closes the connections no longer served here. One closed for
// a disconnect is purged again, now that its sync has stopped (before
// any new connection of the role): it may have held the lease here and
// written after the disconnecting instance purged, behind the fence of a
// disconnected connection, which the disconnecting instance raised first
// where the store fences.
func (r *Runtime) closeAll(ctx context.Context, closing []*system, want map[string]wanted) []error {
	var errs []error
	for _, c := range closing {
		c.close()
		if w := want[c.conn.Role]; w.conn != nil && w.conn.Status == connection.Disconnected {
			if err := r.raiseFence(ctx, disconnectedFence(*w.conn)); err != nil {
				errs = append(errs, err)
			} else if err := r.purgeStore(ctx, c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// pause stops s's syncs and waits for them; its model keeps serving its
// copy, which reads then say is failing.
func pause(s *system) {
	s.stop()
	for _, k := range s.kinds {
		f, _ := s.model.Freshness(k)
		f.State, f.Reason = readmodel.StateFailing, s.waitReason()
		s.model.SetFreshness(k, f)
	}
}

// sameOpening reports whether open was opened as c asks when served how:
// the same connection, consent and organisation, as a system or as a
// held copy, over the same kinds (the firm's engagements moved to or from
// it when a system that keeps proposals was connected or disconnected).
func sameOpening(open *system, c connection.Connection, how serving, kinds []practice.Kind) bool {
	was := open.conn
	return was.ID == c.ID && was.Attempt == c.Attempt && was.OrganisationID == c.OrganisationID && open.held == (how == servedByHeldCopy) &&
		slices.Equal(open.kinds, kinds)
}

// engagementsRole is the role whose system keeps the firm's engagements
// under the rules a Caddyfile firm follows (firmsystem.EngagementsRole)
// over the firm's Caddyfile systems and its connections alike: the role
// the firm names, else the first of records and ledger whose system keeps
// proposals (a connection's by its module's word, before it is opened),
// else none. A Caddyfile system that keeps them keeps them whatever is
// connected later (connKinds). A named role whose system keeps none
// serves none once it is there; until then its reads say it is not
// connected. The caller holds follow.mu.
func (r *Runtime) engagementsRole(f *firm, want map[string]wanted) string {
	if f.keeping(practice.Engagements) != nil {
		return f.engagements
	}
	keeps, there := map[string]bool{}, map[string]bool{}
	for _, role := range []string{firmsystem.EngagementsRecords, firmsystem.EngagementsLedger} {
		if f.serves(role) {
			keeps[role], there[role] = f.keeps[role], true
			continue
		}
		w := want[role]
		if w.serving().open() && !r.follow.purged[w.conn.ID] {
			keeps[role], there[role] = firmsystem.KeepsProposals(role, w.conn.System), true
		}
	}
	role, err := firmsystem.EngagementsRole(f.Engagements, keeps)
	if err != nil {
		if there[f.Engagements] {
			return firmsystem.EngagementsNone
		}
		return f.Engagements
	}
	return role
}

// connKinds are the kinds a connection in role keeps when the firm's
// engagements come from the system in the role engagements names: its
// role's (firmsystem.KindsOf), less the engagements a Caddyfile system
// keeps.
func (f *firm) connKinds(role, engagements string) []practice.Kind {
	kinds := firmsystem.KindsOf(role, engagements)
	if f.keeping(practice.Engagements) != nil {
		kinds = slices.DeleteFunc(kinds, func(k practice.Kind) bool { return k == practice.Engagements })
	}
	return kinds
}

// grantRefused is told by c's adapter that the vendor refused its grant:
// the connection becomes needs_reconnect in the store, for every instance
// to pause its sync. A refusal of an older consent than the stored one
// (a reconnect came meanwhile) or of a connection no longer connected
// changes nothing. It only writes the store: it may be called from the
// sync it pauses, which the follow loop then stops.
//
// The adapter's reason (which names the vendor's error code) goes to the
// log; the connection keeps the sentence an administrator reads: "Xero
// no longer accepts this connection's grant; reconnect it."
func (r *Runtime) grantRefused(c connection.Connection) func(reason string) {
	return func(reason string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.logger.Warn("the vendor refused a connection's grant", zap.String("connection", c.ID), zap.String("firm", c.Firm),
			zap.String("system", c.System), zap.String("reason", reason))
		if err := r.markNeedsReconnect(ctx, c.ID, c.Attempt, readmodel.Plainly(systemLabel(c), reason)); err != nil {
			r.logger.Warn("connection not marked needs_reconnect", zap.String("connection", c.ID), zap.Error(err))
			return
		}
		r.wakeFollower()
	}
}

// systemLabel is how people name c's system ("QuickBooks Online").
func systemLabel(c connection.Connection) string {
	if how, ok := firmsystem.ConnectsOf(c.Role, c.System); ok && how.Label != "" {
		return how.Label
	}
	return c.System
}

// markNeedsReconnect writes needs_reconnect with reason on connection id,
// if it is still connected on attempt, retrying when another write came
// first.
func (r *Runtime) markNeedsReconnect(ctx context.Context, id string, attempt int, reason string) error {
	for {
		cur, err := r.d.Connections.Connection(ctx, id)
		if err != nil {
			return err
		}
		if cur.Status != connection.Connected || cur.Attempt != attempt {
			return nil
		}
		version := cur.Version
		cur.Status, cur.Reason, cur.UpdatedAt = connection.NeedsReconnect, reason, r.now().UTC()
		_, err = r.d.Connections.UpdateConnection(ctx, cur, version)
		if !errors.Is(err, connection.ErrVersion) {
			return err
		}
	}
}

// connections are a firm's connections open here, in role order.
func (f *firm) connections() []*system {
	t := f.table.Load()
	var out []*system
	for _, role := range roles {
		if c := t.conns[role]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// models are the firm's read models on this instance: its Caddyfile
// systems' and those of its connections open here. The cluster holds
// them together: where the firm is held they are loaded and synced, and
// elsewhere they are not.
func (f *firm) models() []*readmodel.Model {
	var out []*readmodel.Model
	for _, s := range f.systems {
		out = append(out, s.model)
	}
	for _, c := range f.connections() {
		out = append(out, c.model)
	}
	return out
}

// allConnections are the firms' connections as the store last said,
// oldest first.
func (r *Runtime) allConnections() []connection.Connection {
	list := r.follow.known.Load()
	if list == nil {
		return nil
	}
	var out []connection.Connection
	for _, c := range *list {
		if r.firm(c.Firm) != nil {
			out = append(out, c)
		}
	}
	return out
}

// liveConnections are every firm's connections open here.
func (r *Runtime) liveConnections() []*system {
	var out []*system
	for _, id := range r.order {
		out = append(out, r.firms[id].connections()...)
	}
	return out
}
