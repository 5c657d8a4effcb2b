package firms

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// system is one of a firm's systems open here, whether its Caddyfile block
// names it or a connection does: the system as its module opened it, the
// read model of the kinds it keeps (the state its change records are
// compared with, and what its reads are answered from) and their syncs.
// A connection's system may instead be its copy alone, held while the
// connection is reconnected (held).
type system struct {
	role, name, label string
	// kinds are the kinds its copy keeps.
	kinds    []practice.Kind
	model    *readmodel.Model
	recorder *changes.Recorder
	opened   firmsystem.Opened
	syncs    []*readmodel.Syncer

	// conn is the connection the system was opened for (its attempt and
	// organisation), nil for a Caddyfile system; current is it as the
	// store last said; app is the connect block's app it goes through.
	conn    *connection.Connection
	current atomic.Pointer[connection.Connection]
	app     string
	// held is a copy served while the connection waits for a new consent
	// or organisation: no system is open, nothing syncs and nothing
	// writes, so the copy is not followed either.
	held bool

	// cancel stops the syncs, nil while they do not run; wg waits for
	// them. Both under the follow loop's lock.
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// latency keeps how long the vendor's notifications took to become
	// change records, for the syncs' status; unwake stops the wakes of
	// its syncs.
	latency *readmodel.Latency
	unwake  []func()

	// sink is where its change records go: a records system's tell the
	// firm's relinker of its clients' changes. tally counts the clients
	// a ledger or document store asked the records system for.
	sink  changes.ChangeSink
	tally *linking.Tally
	// f is the firm it serves.
	f *firm
}

// opening is how a system is opened, beyond its module and role.
type opening struct {
	// records is the firm's records system, for a ledger or document
	// store that names its clients through it.
	records practice.Reader
	// keepsLedger tells a records system that its invoices are the
	// firm's; keepsEngagements a system that keeps proposals whether
	// they are the firm's engagements.
	keepsLedger      bool
	keepsEngagements func() bool
	// fence guards a connection's writes; grantRefused is told when the
	// vendor refuses its grant.
	fence        *readmodel.Fence
	grantRefused func(reason string)
	// webhook is the path below the public address where the system's
	// vendor notifications are taken.
	webhook string
}

// open opens one of firm f's systems in role, on a read model of its own
// (empty: keep gives it its kinds, and Load or MarkUnloaded follow), with
// what every system shares: budgets, metrics, upstream state, the change
// sink its webhooks and writes raise change records into, the locks of
// OAuth2 refreshes. It is the one way a system is opened, whoever names it.
func (r *Runtime) open(f *firm, role string, mod firmsystem.Module, o opening) (*system, error) {
	name := mod.CaddyModule().ID.Name()
	model := readmodel.New(readmodel.Config{Firm: f.ID, Store: r.d.Store, Updates: r.d.Feed, Other: r.d.State, Fence: o.fence,
		Letters: f.letters})
	rec := &changes.Recorder{State: model}
	latency := &readmodel.Latency{}
	notified := r.notified(f.ID, name)
	sink := r.d.Changes
	if role == "records" {
		sink = watchedSink{ChangeSink: sink, rl: f.relinker(r)}
	}
	var tally *linking.Tally
	clients := f.linkerFor(role, nil)
	if clients != nil {
		tally = &linking.Tally{}
		clients = f.linkerFor(role, tally)
	}
	deps := firmsystem.Deps{Firm: f.ID, Records: o.records, Clients: clients, KeepsLedger: o.keepsLedger, KeepsEngagements: o.keepsEngagements,
		WebhookURL: r.publicAddress(o.webhook),
		Upstream: upstream.Deps{
			Logger:        r.logger.Named("upstream").With(zap.String("firm", f.ID), zap.String("system", name)),
			Budget:        r.d.Budget,
			Registerer:    r.d.Metrics,
			State:         model,
			Recorder:      rec,
			Changes:       sink,
			Instance:      name + "/" + f.ID,
			Notifications: r.d.Notices,
			// One instance at a time refreshes an OAuth2 token, under the
			// leases the syncs take turns with.
			Locks:        r.d.Store,
			GrantRefused: o.grantRefused,
			// What a notification leaves is read by the sync's holder,
			// woken wherever it runs.
			Wake: func(ctx context.Context) error { return r.wakes.Ring(ctx, f.ID, role) },
			Heard: func(at time.Time) {
				d := r.d.Clock().Sub(at)
				latency.Add(d, r.d.Clock())
				notified.Observe(d.Seconds())
			},
		}}
	opened, err := mod.Open(deps)
	if err != nil {
		model.Close()
		return nil, fmt.Errorf("%s %s: %w", role, name, err)
	}
	s := &system{role: role, name: name, label: opened.Label, model: model, recorder: rec, opened: opened, latency: latency,
		sink: sink, tally: tally, f: f}
	if s.label == "" {
		s.label = name
	}
	return s, nil
}

// keep has s keep kinds in its copy, with a sync in role over reader: the
// system's own, or the invoices a records system keeps too. A record not
// copied yet is read from the vendor within a small share of its
// allowances, and a miss is remembered.
func (r *Runtime) keep(f *firm, s *system, role string, kinds []practice.Kind, reader practice.Reader) {
	client := s.opened.Client
	onDemand := upstream.NewOnDemand(reader, client, r.d.Budget, f.ID+"/"+role)
	for _, k := range kinds {
		s.model.Serve(k, onDemand)
	}
	s.kinds = append(s.kinds, kinds...)
	opts := []readmodel.SyncOption{
		readmodel.WithLogger(r.logger.Named("sync").With(zap.String("firm", f.ID), zap.String("system", s.name))),
		readmodel.WithLatency(s.latency),
	}
	if client != nil {
		budget := readmodel.SyncBudget{Account: client.BudgetAccount()}
		for _, al := range client.Allowances() {
			budget.Allowances = append(budget.Allowances, readmodel.Allowance{Limit: al.Limit, Per: al.Per})
		}
		opts = append(opts, readmodel.WithVendorCalls(client.Sent, client.BudgetPerHour()), readmodel.WithBudget(budget))
	}
	sync := readmodel.NewSyncer(
		readmodel.SyncedSystem{Role: role, System: s.name, Label: s.label, Kinds: kinds, Reader: reader},
		readmodel.SyncDeps{Model: s.model, Recorder: s.recorder, Sink: s.sink, Checkpoints: r.d.Store, Leases: r.d.Store,
			Holder: r.cfg.Holder},
		r.cfg.Sync, opts...)
	s.syncs = append(s.syncs, sync)
	s.unwake = append(s.unwake, r.wakes.Add(sync))
}

// keeps reports whether s's copy keeps kind k.
func (s *system) keeps(k practice.Kind) bool { return slices.Contains(s.kinds, k) }

// running reports whether s's syncs run here; the caller holds the
// follow loop's lock.
func (s *system) running() bool { return s.cancel != nil }

// run starts s's syncs: a new system's backfill, or a resumed one's
// polls from its checkpoint. stop and close end them.
func (s *system) run() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, sync := range s.syncs {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sync.Run(ctx)
		}()
	}
}

// stop ends s's syncs and waits for them; its copy stays.
func (s *system) stop() { s.halt()() }

// halt asks s's syncs to end, under the follow loop's lock, and returns
// what waits for them, which may be called after the lock is let go.
func (s *system) halt() (wait func()) {
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
	return s.wg.Wait
}

// close ends s's syncs and drops its copy from memory.
func (s *system) close() {
	s.stop()
	for _, unwake := range s.unwake {
		unwake()
	}
	s.unwake = nil
	s.model.Close()
}

// loadSyncs reads the checkpoints of s's syncs, for the status this
// instance reports of them where they run elsewhere.
func (s *system) loadSyncs(ctx context.Context) {
	for _, sync := range s.syncs {
		sync.Load(ctx)
	}
}

// openConnection opens c's system on a read model of its own (the firm's,
// over kinds) with its sync, which the caller starts. The model is loaded
// from the store, so a reopened connection serves its copy at once and
// its sync resumes from its checkpoint; where the firm is not held here,
// it is loaded only when a read no holder takes asks.
func (r *Runtime) openConnection(ctx context.Context, f *firm, c connection.Connection, kinds []practice.Kind) (*system, error) {
	mod, err := r.d.Connected.Module(ctx, c)
	if err != nil {
		return nil, err
	}
	// Its writes are fenced by its attempt: once another organisation
	// is chosen (PurgeOrganisation raises the fence), this opening's are
	// refused, even on an instance that has not yet seen the change.
	fence := connectionFence(c)
	keepsEngagements := slices.Contains(kinds, practice.Engagements)
	s, err := r.open(f, c.Role, mod, opening{keepsEngagements: func() bool { return keepsEngagements }, fence: &fence,
		grantRefused: r.grantRefused(c), webhook: "/connect/webhooks/" + c.System + "/" + c.ID})
	if err != nil {
		return nil, err
	}
	s.conn, s.app = &c, appOf(c)
	// One sync, of the role's kinds only: an XPM records connection does
	// not keep the ledger as a Caddyfile XPM may, since a ledger
	// connection made later would sync the same kind into the same copy;
	// the firm connects its Xero organisation as its ledger.
	r.keep(f, s, c.Role, kinds, s.opened.Reader)
	readmodel.ShareBudgets(s.syncs)
	if !f.holds() {
		s.model.MarkUnloaded()
	} else if err := s.model.Load(ctx); err != nil {
		s.model.Close()
		return nil, err
	}
	s.loadSyncs(ctx)
	s.current.Store(&c)
	return s, nil
}

// holdCopy serves c's copy while the connection is reconnected: the
// role's kinds loaded from the store, failing, with the checkpoint's
// progress, and no system, sync or writer. The copy is not followed
// either: nothing writes it until the connection is connected again,
// and then the system is opened anew on the store's copy.
func (r *Runtime) holdCopy(ctx context.Context, f *firm, c connection.Connection, kinds []practice.Kind) (*system, error) {
	model := readmodel.New(readmodel.Config{Firm: f.ID, Store: r.d.Store, Other: r.d.State, Letters: f.letters})
	for _, k := range kinds {
		model.Serve(k, nil)
	}
	if err := model.Load(ctx); err != nil {
		model.Close()
		return nil, err
	}
	sync := readmodel.NewSyncer(readmodel.SyncedSystem{Role: c.Role, System: c.System, Label: systemLabel(c), Kinds: kinds},
		readmodel.SyncDeps{Model: model, Checkpoints: r.d.Store, Leases: r.d.Store, Holder: r.cfg.Holder},
		readmodel.SyncConfig{})
	sync.Load(ctx)
	s := &system{role: c.Role, name: c.System, label: systemLabel(c), kinds: kinds, model: model, syncs: []*readmodel.Syncer{sync},
		conn: &c, app: appOf(c), held: true}
	s.current.Store(&c)
	return s, nil
}

// appOf is the connect block's app c's system goes through.
func appOf(c connection.Connection) string {
	how, _ := firmsystem.ConnectsOf(c.Role, c.System)
	return how.App
}
