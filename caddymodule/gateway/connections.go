package gateway

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
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// Connections are a firm's systems connected by its administrator
// (caddymodule/connect) rather than named in the Caddyfile. They live in
// the store, so every instance follows it: each one opens, syncs, pauses
// and drops the systems the store's connections name, within a poll of
// any instance changing one. A role the firm's Caddyfile block sets is
// never served by a connection.

// connectionStore is what the runtime reads and writes of the firms'
// connections.
type connectionStore interface {
	// Connections lists a firm's connections, every firm's for "",
	// oldest first.
	Connections(ctx context.Context, firm string) ([]connection.Connection, error)
	Connection(ctx context.Context, id string) (connection.Connection, error)
	// UpdateConnection writes c if the stored version is still version
	// (connection.ErrVersion when not).
	UpdateConnection(ctx context.Context, c connection.Connection, version int64) (connection.Connection, error)
}

// connFollow is the state of an app's following of the connections.
type connFollow struct {
	// mu orders the follow loop and Purge.
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

// failedAgain reports whether c's system failed to open as it did at
// the last look; the caller holds mu.
func (f *connFollow) failedAgain(c connection.Connection, err error) bool {
	key := fmt.Sprintf("%s/%d", c.ID, c.Attempt)
	again := f.failed[key] == err.Error()
	f.failed[key] = err.Error()
	return again
}

func newConnFollow() *connFollow {
	return &connFollow{wake: make(chan struct{}, 1), purged: map[string]bool{}, failed: map[string]string{}}
}

// followEvery is how often an instance reads the store's connections.
const followEvery = 500 * time.Millisecond

// roles are the roles a connection plays, records first: a ledger's
// invoices may fall back to a records system that keeps them.
var roles = []string{"records", "ledger", "documents"}

// connSystem is one connection open on this instance: its system, the
// read model of the kinds it serves and their syncs; or, while the
// connection is reconnected, the copy it holds alone (held).
type connSystem struct {
	// opened is the connection the system was opened for (its attempt
	// and organisation); conn is it as the store last said.
	opened connection.Connection
	conn   atomic.Pointer[connection.Connection]
	// kinds are the kinds it serves: its role's, with the firm's
	// engagements when its system keeps them (connKinds).
	kinds    []practice.Kind
	model    *readmodel.Model
	syncs    []*readmodel.Syncer
	upstream upstreamSystem
	clients  practice.ClientWriter
	jobs     practice.JobWriter
	// held is a copy served while the connection waits for a new consent
	// or organisation: no system is open, nothing syncs and nothing
	// writes, so the copy is not followed either.
	held bool

	// cancel stops the syncs, nil while they are paused; wg waits for
	// them.
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// running reports whether the connection's syncs run here; the caller
// holds follow.mu.
func (c *connSystem) running() bool { return c.cancel != nil }

// current is the connection as the store last said.
func (c *connSystem) current() connection.Connection { return *c.conn.Load() }

// paused reports whether the connection waits for its administrator:
// needs_reconnect, or a reconnect under way. Its copy is served failing.
func (c *connSystem) paused() bool { return c.current().Status != connection.Connected }

// waitReason is why a paused connection waits for its administrator, in
// the gateway's words (the connection's reason), never the vendor's.
func (c *connSystem) waitReason() string {
	if why := c.current().Reason; why != "" {
		return why
	}
	return "the connection waits to be reconnected"
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

// wantedConnections reads the store's connections, oldest first, into
// what each firm's roles want. A role has at most one connection that is
// not disconnected (the Manager refuses another), so the newest decides.
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
func (a *App) followConnections(ctx context.Context, tick <-chan time.Time) {
	said := ""
	for {
		err := a.applyConnections(ctx)
		if err != nil && ctx.Err() == nil && err.Error() != said {
			// Once per cause, not every look while the store is down.
			a.logger.Warn("connections not followed; trying again", zap.Error(err))
		}
		if said = ""; err != nil {
			said = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-a.follow.wake:
		}
	}
}

// wakeFollower asks the follow loop to look now.
func (a *App) wakeFollower() {
	select {
	case a.follow.wake <- struct{}{}:
	default:
	}
}

// applyConnections is one look at the store: every configured firm's
// roles that its Caddyfile block leaves unset are served by their live
// connection, opened (again, when its attempt or tenant changed: a
// reconnect's new token or organisation), running or paused as its
// status says; a connection no longer live is closed.
func (a *App) applyConnections(ctx context.Context) error {
	if a.connections == nil {
		return nil
	}
	// The list is read under the lock: a look that read it earlier must
	// not apply an older list over a newer one (run a sync just paused).
	a.follow.mu.Lock()
	defer a.follow.mu.Unlock()
	list, err := a.connections.Connections(ctx, "")
	if err != nil {
		return err
	}
	a.follow.known.Store(&list)
	want := wantedConnections(list)
	var errs []error
	for i := range a.Firms {
		f := &a.Firms[i]
		b := a.firms[f.ID]
		if b == nil {
			continue
		}
		if err := a.applyFirm(ctx, f, b, want[f.ID]); err != nil {
			errs = append(errs, fmt.Errorf("firm %s: %w", f.ID, err))
		}
	}
	return errors.Join(errs...)
}

// applyFirm brings one firm's connections in line with want; the caller
// holds follow.mu.
func (a *App) applyFirm(ctx context.Context, f *Firm, b *firmBackends, want map[string]wanted) error {
	cur := b.conns.Load()
	next := newConnSet()
	next.engagements = a.engagementsRole(f, b, want)
	var closing []*connSystem
	var errs []error
	for _, role := range roles {
		if f.sets(role) || b.model != nil && b.model.Owns(firmsystem.Kinds(role)[0]) {
			// The Caddyfile's system serves the role (XPM's invoices
			// for a firm that names no ledger among them): two syncs of
			// one kind would write one copy.
			continue
		}
		w := want[role]
		how := w.serving()
		if how != servedByNone && a.follow.purged[w.conn.ID] {
			// Purged here while the store still said otherwise: never
			// opened again.
			how = servedNotConnected
		}
		var open *connSystem
		if cur != nil {
			open = cur.byRole[role]
		}
		kinds := b.connKinds(role, next.engagements)
		if open != nil && (how != servedBySystem && how != servedByHeldCopy || !sameOpening(open, *w.conn, how, kinds)) {
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
			if how == servedByHeldCopy {
				open, err = a.holdCopy(ctx, f, *w.conn, kinds)
			} else {
				open, err = a.openConnection(ctx, f, *w.conn, kinds)
			}
			if err != nil {
				next.unserved[role] = notOpened(role)
				if !a.follow.failedAgain(*w.conn, err) {
					errs = append(errs, fmt.Errorf("%s %s: %w", role, w.conn.System, err))
				}
				continue
			}
		}
		c := *w.conn
		open.conn.Store(&c)
		switch {
		case c.Status != connection.Connected:
			a.pauseConnection(open)
		case !a.holdsHere(f.ID):
			// Synced where the firm is held (placement.go).
			a.stopConnection(open)
		case !open.running():
			a.runConnection(open)
		}
		next.byRole[role] = open
	}
	// Requests take the new set before the old systems stop.
	b.conns.Store(next)
	for _, c := range closing {
		a.closeConnection(c)
		if w := want[c.opened.Role]; w.conn != nil && w.conn.Status == connection.Disconnected {
			// Its sync may have held the lease here and written after
			// the disconnecting instance purged: purge again, now that
			// it has stopped (before any new connection of the role),
			// behind the fence of a disconnected connection, which the
			// disconnecting instance raised first where the store fences.
			if err := a.raiseFence(ctx, disconnectedFence(*w.conn)); err != nil {
				errs = append(errs, err)
			} else if err := a.purgeStore(ctx, c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sameOpening reports whether open was opened as c asks when served how:
// the same connection, consent and organisation, as a system or as a
// held copy, over the same kinds (the firm's engagements moved to or from
// it when a system that keeps proposals was connected or disconnected).
func sameOpening(open *connSystem, c connection.Connection, how serving, kinds []practice.Kind) bool {
	was := open.opened
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
func (a *App) engagementsRole(f *Firm, b *firmBackends, want map[string]wanted) string {
	if b.model != nil && b.model.Owns(practice.Engagements) {
		return b.engagements
	}
	keeps, there := map[string]bool{}, map[string]bool{}
	for _, role := range []string{firmsystem.EngagementsRecords, firmsystem.EngagementsLedger} {
		if f.sets(role) || b.model != nil && b.model.Owns(firmsystem.Kinds(role)[0]) {
			keeps[role], there[role] = b.keeps[role], true
			continue
		}
		w := want[role]
		if how := w.serving(); (how == servedBySystem || how == servedByHeldCopy) && !a.follow.purged[w.conn.ID] {
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

// connKinds are the kinds a connection in role serves when the firm's
// engagements come from the system in the role engagements names: its
// role's (firmsystem.KindsOf), less the engagements a Caddyfile system
// keeps.
func (b *firmBackends) connKinds(role, engagements string) []practice.Kind {
	kinds := firmsystem.KindsOf(role, engagements)
	if b.model != nil && b.model.Owns(practice.Engagements) {
		kinds = slices.DeleteFunc(kinds, func(k practice.Kind) bool { return k == practice.Engagements })
	}
	return kinds
}

// sets reports whether the firm's Caddyfile block names its system in
// role, which then takes precedence over any connection.
func (f *Firm) sets(role string) bool {
	switch role {
	case "records":
		return f.RecordsRaw != nil
	case "ledger":
		return f.LedgerRaw != nil
	case "documents":
		return f.DocumentsRaw != nil
	}
	return false
}

// openConnection opens c's system on a read model of its own (the firm's,
// over the kinds of its role) and makes its sync, which the caller
// starts. The model is loaded from the store, so a reopened connection
// serves its copy at once and its sync resumes from its checkpoint.
func (a *App) openConnection(ctx context.Context, f *Firm, c connection.Connection, kinds []practice.Kind) (*connSystem, error) {
	raw, err := a.Connect.ModuleConfig(ctx, a.upstreamState, c)
	if err != nil {
		return nil, err
	}
	val, err := a.caddyCtx.LoadModuleByID(firmsystem.Namespace(c.Role)+"."+c.System, raw)
	if err != nil {
		return nil, err
	}
	mod, ok := val.(firmsystem.Module)
	if !ok {
		return nil, fmt.Errorf("module %T is not a firm system", val)
	}
	cfg, err := a.Sync.config()
	if err != nil {
		return nil, err
	}
	// Its writes are fenced by its attempt: once another organisation
	// is chosen (PurgeOrganisation raises the fence), this opening's are
	// refused, even on an instance that has not yet seen the change.
	fence := connectionFence(c)
	model := readmodel.New(readmodel.Config{Firm: f.ID, Store: a.readStore, Updates: a.readFeed, Other: a.upstreamState, Fence: &fence,
		Letters: a.lettersOf(f.ID)})
	rec := &changes.Recorder{State: model}
	keepsEngagements := slices.Contains(kinds, practice.Engagements)
	opened, label, err := a.openSystem(a.caddyCtx, f.ID, c.Role, mod, model, rec, nil, false, func() bool { return keepsEngagements }, a.grantRefused(c))
	if err != nil {
		return nil, err
	}
	reader := opened.Reader
	cs := &connSystem{opened: c, kinds: kinds, model: model, clients: opened.Clients, jobs: opened.Jobs,
		upstream: upstreamSystem{role: c.Role, name: c.System, client: opened.Client, webhook: opened.Webhook}}
	// One sync, of the role's kinds only: an XPM records connection does
	// not keep the ledger as a Caddyfile XPM may, since a ledger
	// connection made later would sync the same kind into the same copy;
	// the firm connects its Xero organisation as its ledger.
	cs.syncs = append(cs.syncs, a.syncFor(f, c.Role, kinds, c.System, label, model, reader, opened.Client, rec, cfg))
	readmodel.ShareBudgets(cs.syncs)
	if !a.holdsHere(f.ID) {
		// Loaded where the firm is held, and here only when a read no
		// holder takes asks (placement.go).
		model.MarkUnloaded()
	} else if err := model.Load(ctx); err != nil {
		model.Close()
		return nil, err
	}
	for _, s := range cs.syncs {
		s.Load(ctx)
	}
	cs.conn.Store(&c)
	return cs, nil
}

// holdCopy serves c's copy while the connection is reconnected: the
// role's kinds loaded from the store, failing, with the checkpoint's
// progress, and no system, sync or writer. The copy is not followed
// either: nothing writes it until the connection is connected again,
// and then the system is opened anew on the store's copy.
func (a *App) holdCopy(ctx context.Context, f *Firm, c connection.Connection, kinds []practice.Kind) (*connSystem, error) {
	model := readmodel.New(readmodel.Config{Firm: f.ID, Store: a.readStore, Other: a.upstreamState, Letters: a.lettersOf(f.ID)})
	for _, k := range kinds {
		model.Serve(k, nil)
	}
	if err := model.Load(ctx); err != nil {
		model.Close()
		return nil, err
	}
	sync := readmodel.NewSyncer(readmodel.SyncedSystem{Role: c.Role, System: c.System, Label: c.System, Kinds: kinds},
		readmodel.SyncDeps{Model: model, Checkpoints: a.readStore, Leases: a.readStore, Holder: a.holder},
		readmodel.SyncConfig{})
	sync.Load(ctx)
	cs := &connSystem{opened: c, kinds: kinds, model: model, syncs: []*readmodel.Syncer{sync}, held: true,
		upstream: upstreamSystem{role: c.Role, name: c.System}}
	cs.conn.Store(&c)
	return cs, nil
}

// runConnection starts c's syncs: a new connection's backfill, or a
// resumed one's polls from its checkpoint.
func (a *App) runConnection(c *connSystem) {
	// The syncs' own: pauseConnection and closeConnection end them,
	// and Stop closes every connection.
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	for _, s := range c.syncs {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			s.Run(ctx)
		}()
	}
}

// pauseConnection stops c's syncs and waits for them; its model keeps
// serving its copy, which reads then say is failing.
func (a *App) pauseConnection(c *connSystem) {
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	c.wg.Wait()
	for _, k := range c.kinds {
		f, _ := c.model.Freshness(k)
		f.State, f.Reason = readmodel.StateFailing, c.waitReason()
		c.model.SetFreshness(k, f)
	}
}

// stopConnection stops c's syncs and waits for them, as on an instance
// that does not hold its firm: its copy is served by the holders.
func (a *App) stopConnection(c *connSystem) {
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	c.wg.Wait()
}

// holdsHere reports whether this instance holds the firm's models and
// runs their syncs: every instance does without a bound.
func (a *App) holdsHere(firm string) bool { return a.Holds(firm) }

// syncsHere reports whether c's syncs should run where its firm is
// held: it is open as a system (not a held copy) and connected; the
// caller holds follow.mu.
func (c *connSystem) syncsHere() bool {
	return !c.held && c.current().Status == connection.Connected
}

// closeConnection stops c's syncs and drops its model from memory.
func (a *App) closeConnection(c *connSystem) {
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	c.wg.Wait()
	c.model.Close()
}

// closeConnections closes every connection open here, when the app stops.
func (a *App) closeConnections() {
	if a.follow == nil {
		return
	}
	a.follow.mu.Lock()
	defer a.follow.mu.Unlock()
	for _, b := range a.firms {
		if cur := b.conns.Swap(nil); cur != nil {
			for _, c := range cur.byRole {
				a.closeConnection(c)
			}
		}
	}
}

// grantRefused is told by c's adapter that the vendor refused its grant:
// the connection becomes needs_reconnect in the store, for every instance
// to pause its sync. A refusal of an older consent than the stored one
// (a reconnect came meanwhile) or of a connection no longer connected
// changes nothing. It only writes the store: it may be called from the
// sync it pauses, which the follow loop then stops.
func (a *App) grantRefused(c connection.Connection) func(reason string) {
	return func(reason string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.markNeedsReconnect(ctx, c.ID, c.Attempt, reason); err != nil {
			a.logger.Warn("connection not marked needs_reconnect", zap.String("connection", c.ID), zap.Error(err))
			return
		}
		a.wakeFollower()
	}
}

// markNeedsReconnect writes needs_reconnect with reason on connection id,
// if it is still connected on attempt, retrying when another write came
// first.
func (a *App) markNeedsReconnect(ctx context.Context, id string, attempt int, reason string) error {
	for {
		cur, err := a.connections.Connection(ctx, id)
		if err != nil {
			return err
		}
		if cur.Status != connection.Connected || cur.Attempt != attempt {
			return nil
		}
		version := cur.Version
		cur.Status, cur.Reason, cur.UpdatedAt = connection.NeedsReconnect, reason, a.now().UTC()
		_, err = a.connections.UpdateConnection(ctx, cur, version)
		if !errors.Is(err, connection.ErrVersion) {
			return err
		}
	}
}

// now is the app's clock.
func (a *App) now() time.Time {
	if a.clock != nil {
		return a.clock()
	}
	return time.Now()
}
