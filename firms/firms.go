// Package firms is the firms' runtime: each firm the gateway serves, the
// systems its records come from (named by its Caddyfile block, or
// connected by its administrator and followed in the store), their read
// models and syncs, the vendor webhooks they receive, and the one table
// per firm of what serves each kind of its records.
//
// It knows no Caddy: the gateway loads a firm's Caddyfile systems and
// hands them over opened as modules (firmsystem.Module), and says how a
// connection's module is loaded (Connected); the stores, the change sink
// and the rest are dependencies it declares (Deps). A system is opened
// one way, whoever names it (open.go): on a read model of its own, over
// the kinds it keeps, with its change sink and its webhook receiver made
// once. Where instances share the firms, the cluster has the runtime
// hold a firm (Hold) or let go of it (Release); otherwise every firm is
// held everywhere.
package firms

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// Config is what the runtime serves.
type Config struct {
	// Firms are the firms, in the configuration's order.
	Firms []Firm
	// Sync paces the syncs of the firms' systems.
	Sync readmodel.SyncConfig
	// Holder names this instance in the syncs' leases.
	Holder string
	// Placed says that the cluster places the firms: each is loaded and
	// synced only where it is held (Hold); without it every firm is held
	// here.
	Placed bool
	// Connects says that firms may connect systems of their own (the
	// connect block registers vendor apps): a role a firm names for its
	// engagements and leaves unset is then left to a connection.
	Connects bool
	// PublicURL is the gateway's address as vendors reach it (the
	// connect block's public_url): a system whose vendor notifies only
	// while subscribed subscribes to its address below it. Empty: such a
	// system is polled alone, unless its block names its address.
	PublicURL string
}

// WakeChannel carries the wakes of the syncs between instances (Redis):
// the holder of a sync is seldom the instance a vendor's notification
// reached.
type WakeChannel interface {
	readmodel.WakeChannel
	// SubscribeWakes calls fn with each sync's name any instance
	// publishes, until ctx ends or the channel fails.
	SubscribeWakes(ctx context.Context, fn func(name string)) error
}

// Firm is one firm and the systems its Caddyfile block names.
type Firm struct {
	ID   string
	Name string
	// Demo are the roles the block leaves to the seeded demo records.
	Demo []string
	// Engagements is the role the block names for the firm's engagements
	// (records, ledger or none); "" lets the systems say.
	Engagements string
	// LinkClients is off when the firm's ledger and document store name
	// no client (firmsystem.LinkOff), its connections' too; by default
	// they link to its records system's clients.
	LinkClients string
	// Systems are the systems the block names, loaded, records first.
	Systems []System
}

// System is one of a firm's Caddyfile systems: its module, loaded.
type System struct {
	Role   string
	Module firmsystem.Module
}

// Store is what the read models and their syncs keep in the gateway's
// store: records, checkpoints and leases (the leases also order OAuth2
// refreshes: upstream.Locks).
type Store interface {
	readmodel.Store
	readmodel.Checkpoints
	readmodel.Leases
}

// Connections are the firms' connections in the store, which every
// instance follows.
type Connections interface {
	// Connections lists a firm's connections, every firm's for "",
	// oldest first.
	Connections(ctx context.Context, firm string) ([]connection.Connection, error)
	Connection(ctx context.Context, id string) (connection.Connection, error)
	// UpdateConnection writes c if the stored version is still version
	// (connection.ErrVersion when not).
	UpdateConnection(ctx context.Context, c connection.Connection, version int64) (connection.Connection, error)
}

// Connected opens the systems of the firms' connections.
type Connected interface {
	// Module is the module connection c's system opens as, configured
	// by its app and loaded.
	Module(ctx context.Context, c connection.Connection) (firmsystem.Module, error)
	// App is the connect block's vendor app named name (a
	// firmsystem.Subscriber, a firmsystem.Deliveries, ...); nil when it
	// registers none.
	App(name string) any
}

// Demo are the seeded demo records: a sandbox's, and a live firm's roles
// its block leaves to them.
type Demo interface {
	practice.Reader
	practice.ClientWriter
	practice.JobWriter
}

// Deps are what the runtime works with.
type Deps struct {
	Logger *zap.Logger
	// Metrics is where the vendor clients register theirs.
	Metrics prometheus.Registerer
	// Store keeps the read models; Feed, when several instances write
	// it, orders their updates.
	Store Store
	Feed  readmodel.UpdateFeed
	// State is the upstream state store (tokens, first-seen stamps, what
	// the systems remember beyond the copies), sealed.
	State changes.StateStore
	// Notices keep the vendors' verified notifications until what they
	// name is read (the notification inbox).
	Notices notifications.Inbox
	// Budget paces every call to the vendors.
	Budget upstream.Budget
	// Changes takes the change records the systems raise: the event
	// pipeline's intake.
	Changes changes.ChangeSink
	Demo    Demo
	// Connections, when set, are followed: the firms' connected systems
	// are opened through Connected.
	Connections Connections
	Connected   Connected
	// Clock is the time; nil is the system's.
	Clock func() time.Time
	// Wakes, when several instances share the firms, carries the wakes
	// of their syncs; nil wakes this process's alone.
	Wakes WakeChannel
}

// Runtime runs the firms' systems on this instance.
type Runtime struct {
	cfg    Config
	d      Deps
	logger *zap.Logger
	// firms are fixed once New returns; order is the configuration's.
	firms map[string]*firm
	order []string
	// follow is the following of the connections (connections.go).
	follow *follow
	// wakes ring the syncs of the systems whose vendors notify;
	// notified are how long their notifications took to become change
	// records.
	wakes     *readmodel.Wakes
	latencies *prometheus.HistogramVec

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New opens every firm's Caddyfile systems and makes their syncs, which
// Start runs; each firm's model is loaded now, unless the cluster places
// it.
func New(ctx context.Context, cfg Config, d Deps) (*Runtime, error) {
	if d.Logger == nil {
		d.Logger = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	r := &Runtime{cfg: cfg, d: d, logger: d.Logger, firms: map[string]*firm{}, follow: newFollow()}
	var shared readmodel.WakeChannel
	if d.Wakes != nil {
		shared = d.Wakes
	}
	r.wakes = readmodel.NewWakes(shared)
	r.latencies = notifiedMetric(d.Metrics)
	for _, fc := range cfg.Firms {
		if _, ok := r.firms[fc.ID]; ok {
			r.closeFirms()
			return nil, fmt.Errorf("firm %s is configured twice", fc.ID)
		}
		f, err := r.openFirm(ctx, fc)
		if err != nil {
			r.closeFirms()
			return nil, fmt.Errorf("firm %s: %w", fc.ID, err)
		}
		r.firms[fc.ID] = f
		r.order = append(r.order, fc.ID)
	}
	return r, nil
}

// Start runs the syncs of the firms held here and the following of the
// connections; Stop ends them.
func (r *Runtime) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if !r.cfg.Placed {
		for _, f := range r.firms {
			for _, s := range f.systems {
				s.run()
			}
		}
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(followEvery)
		defer t.Stop()
		r.followConnections(ctx, t.C)
	}()
	if r.d.Wakes != nil {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.followWakes(ctx)
		}()
	}
}

// followWakes rings this instance's syncs when another instance took a
// notification for them, until ctx ends; a channel that fails is
// subscribed to again (meanwhile the holders look every few seconds).
func (r *Runtime) followWakes(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.d.Wakes.SubscribeWakes(ctx, r.wakes.Here)
		if ctx.Err() != nil {
			return
		}
		r.logger.Warn("the wakes of other instances are not heard; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// publicAddress is path below the public address, "" without one.
func (r *Runtime) publicAddress(path string) string {
	if r.cfg.PublicURL == "" || path == "" {
		return ""
	}
	return strings.TrimSuffix(r.cfg.PublicURL, "/") + path
}

// Stop ends every sync and the following of the connections, and drops
// the copies from memory.
func (r *Runtime) Stop() {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
	}
	r.closeFirms()
}

// closeFirms closes every system open here: the Caddyfile's and the
// connections'.
func (r *Runtime) closeFirms() {
	r.follow.mu.Lock()
	defer r.follow.mu.Unlock()
	for _, f := range r.firms {
		if f.relink != nil {
			f.relink.close()
		}
		for _, s := range f.systems {
			s.close()
		}
		t := f.table.Load()
		f.table.Store(f.decide(newTable(), false))
		for _, c := range t.conns {
			c.close()
		}
	}
}

// firm is one firm on this instance: its Caddyfile systems, opened once,
// and the table of what serves each kind, which its connections change.
type firm struct {
	Firm
	systems []*system
	// keeps are the roles whose Caddyfile system keeps proposals;
	// engagements is the role whose system keeps the firm's engagements
	// as its Caddyfile systems say (firmsystem.EngagementsRole: none
	// when none does), until its connections are followed.
	keeps       map[string]bool
	engagements string
	demo        map[string]bool
	demoRecords Demo
	// letters are the firm's letters, shared by the copies of its
	// systems, Caddyfile's and connections' alike.
	letters *practice.Letters
	// placed says that the cluster places the firm; held is set while
	// this instance holds it, under follow.mu.
	placed bool
	held   atomic.Bool
	// table is what serves each kind, replaced whole while requests read
	// it (table.go).
	table atomic.Pointer[table]
	// relink reconciles the ledger and document store when the records
	// system gains a client (linking.go).
	relink     *relinker
	relinkOnce sync.Once
}

// holds reports whether this instance holds the firm's models and runs
// their syncs: every instance does without a cluster.
func (f *firm) holds() bool { return !f.placed || f.held.Load() }

// sets reports whether the firm's Caddyfile block names its system in
// role, which then takes precedence over any connection.
func (f *firm) sets(role string) bool {
	return slices.ContainsFunc(f.Systems, func(s System) bool { return s.Role == role })
}

// keeping is the Caddyfile system that keeps kind k, nil when none does.
func (f *firm) keeping(k practice.Kind) *system {
	for _, s := range f.systems {
		if slices.Contains(s.kinds, k) {
			return s
		}
	}
	return nil
}

// serves reports whether the firm's Caddyfile serves role: it names a
// system in the role, or its records system keeps the role's kinds too
// (Xero Practice Manager's invoices when the firm names no ledger).
func (f *firm) serves(role string) bool {
	kinds := firmsystem.Kinds(role)
	return f.sets(role) || len(kinds) > 0 && f.keeping(kinds[0]) != nil
}

// openFirm opens a firm's Caddyfile systems, each on a read model of its
// own, then gives each the kinds it keeps: which system keeps the firm's
// engagements is known once every one is open. Records come first, since
// a ledger or document store may name its clients through them.
func (r *Runtime) openFirm(ctx context.Context, fc Firm) (*firm, error) {
	f := &firm{Firm: fc, keeps: map[string]bool{}, demo: map[string]bool{}, demoRecords: r.d.Demo,
		letters: practice.NewLetters(), placed: r.cfg.Placed}
	for _, role := range fc.Demo {
		f.demo[role] = true
	}
	ledgerless := !f.sets("ledger")
	var records practice.Reader
	// A system that keeps proposals asks, when it reads them, whether
	// they are the firm's engagements.
	var engagementsFrom atomic.Value // string
	for _, sc := range fc.Systems {
		role := sc.Role
		s, err := r.open(f, role, sc.Module, opening{records: records,
			webhook: "/ingest/" + f.ID + "/" + sc.Module.CaddyModule().ID.Name(),
			// A records system keeps the firm's invoices too (XPM,
			// Karbon's billing) when the firm names no ledger.
			keepsLedger:      role == "records" && ledgerless,
			keepsEngagements: func() bool { return engagementsFrom.Load() == role },
		})
		if err != nil {
			r.closeSystems(f)
			return nil, err
		}
		f.systems = append(f.systems, s)
		if role == "records" {
			records = s.opened.Reader
		}
		f.keeps[role] = s.opened.Engagements && role != "documents"
	}
	engagements, err := firmsystem.EngagementsRole(fc.Engagements, f.keeps)
	if named := fc.Engagements; (named == firmsystem.EngagementsRecords || named == firmsystem.EngagementsLedger) && !f.sets(named) && r.cfg.Connects {
		// The role is left to a connection, which keeps the engagements
		// once connected (applyFirm).
		engagements, err = named, nil
	}
	if err != nil {
		r.closeSystems(f)
		return nil, err
	}
	engagementsFrom.Store(engagements)
	f.engagements = engagements
	if err := r.keepFirm(ctx, f, ledgerless); err != nil {
		r.closeSystems(f)
		return nil, err
	}
	f.table.Store(f.decide(newTable(), false))
	return f, nil
}

// keepFirm gives each of the firm's Caddyfile systems its kinds and their
// syncs, and loads its copy unless the cluster places the firm.
func (r *Runtime) keepFirm(ctx context.Context, f *firm, ledgerless bool) error {
	var syncs []*readmodel.Syncer
	for _, s := range f.systems {
		if s.role == "records" && s.opened.Ledger != nil && ledgerless {
			// Its invoices are synced as the ledger; its webhook route
			// (records) receives their notifications too.
			r.keep(f, s, "ledger", firmsystem.Kinds("ledger"), s.opened.Ledger)
		}
		r.keep(f, s, s.role, firmsystem.KindsOf(s.role, f.engagements), s.opened.Reader)
		syncs = append(syncs, s.syncs...)
	}
	// The firm's systems on one vendor account share its allowances.
	readmodel.ShareBudgets(syncs)
	for _, s := range f.systems {
		if f.placed {
			// Loaded only where the cluster holds it (Hold).
			s.model.MarkUnloaded()
		} else if err := s.model.Load(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runtime) closeSystems(f *firm) {
	for _, s := range f.systems {
		s.close()
	}
}

// firm is the firm id names, nil when the gateway serves none.
func (r *Runtime) firm(id string) *firm { return r.firms[id] }

// FirmName is a firm's display name (its id when it has none), false for
// a firm the gateway does not serve.
func (r *Runtime) FirmName(id string) (string, bool) {
	f := r.firm(id)
	if f == nil {
		return "", false
	}
	if f.Name == "" {
		return f.ID, true
	}
	return f.Name, true
}

// DemoRoles are the roles the firm's block leaves to the demo records.
func (r *Runtime) DemoRoles(id string) []string {
	if f := r.firm(id); f != nil {
		return f.Demo
	}
	return nil
}

// Configured reports whether the firm's Caddyfile block serves role,
// which then takes precedence over any connection: it names a system in
// that role, or its records system keeps that role's kinds too (Xero
// Practice Manager's invoices when the firm names no ledger).
func (r *Runtime) Configured(id, role string) bool {
	f := r.firm(id)
	return f != nil && f.serves(role)
}

// Systems are what serve a tenant's records: the firm's systems for its
// live records, the seeded demo records for its sandbox; false for a firm
// the gateway does not serve.
func (r *Runtime) Systems(t practice.Tenant) (Served, bool) {
	f := r.firm(t.Firm)
	if f == nil {
		return Served{}, false
	}
	if t.Sandbox {
		return Served{demo: r.d.Demo}, true
	}
	return Served{f: f}, true
}

// now is the runtime's clock.
func (r *Runtime) now() time.Time { return r.d.Clock() }

// errNoFirm is a firm the gateway does not serve.
func errNoFirm(id string) error { return fmt.Errorf("no firm %q: %w", id, practice.ErrNotFound) }
