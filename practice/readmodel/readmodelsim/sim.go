// Package readmodelsim is a deterministic simulation of a firm's read
// model sync: a vendor whose records are created, changed and deleted
// while the sync pages through them, webhooks delayed, repeated,
// reordered and dropped, two instances sharing one store whose leases
// expire in mid-step, the shared feed trimmed, instances restarted, an
// injected clock and one seeded scheduler, so that a failing seed
// replays exactly. After each schedule and a quiet vendor for a poll
// interval and a reconciliation, it checks that every instance's model
// equals the vendor, that no record was unreadable while it existed, and
// that the change records never reverse a newer state and raise one per
// distinct state. With Options.QuickBooksInvoices the firm's ledger is
// QuickBooks Online's invoices, followed through its change data capture.
// With Options.KarbonInvoices the firm's ledger is
// Karbon's billing too, synced on its own beside the records: invoices
// listed most recently updated first, webhooks that tell updates alone
// (never a creation, never a deletion) and are left to the sync for an
// invoice the instance has not seen, deletions found by the
// reconciliation alone.
package readmodelsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/stamps"
)

const firm = "frm_sim"

var (
	tenant = practice.Tenant{Firm: firm}
	// kinds are the records system's.
	kinds  = []practice.Kind{practice.Clients, practice.Jobs}
	start  = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	config = readmodel.SyncConfig{Poll: 30 * time.Second, Reconcile: 3 * time.Minute, LeaseTTL: 30 * time.Second}
)

// Options shape a run.
type Options struct {
	Seed uint64
	// Events is how many events run before the vendor goes quiet;
	// default 300.
	Events int
	// Trace, when set, is told every event.
	Trace func(format string, args ...any)
	// KarbonInvoices adds the ledger's invoices as Karbon's billing
	// gives them, with their own sync.
	KarbonInvoices bool
	// QuickBooksInvoices adds the ledger's invoices as QuickBooks Online
	// gives them, with their own sync following its change data capture
	// (CDC: time positions answered with an overlap, stale answers,
	// deletions as Gone, a look-back and a cap past which the sync
	// reconciles), and webhooks that tell creations and updates.
	QuickBooksInvoices bool
	// Membership makes the instances hold the firm and let go of it
	// between steps, as the placement of firms over a memory bound does:
	// an instance that lets go stops its syncs, gives up their leases
	// and unloads its copy, answering what it is asked from the shared
	// store; a killed one starts again holding the firm or not. Callers
	// read through either instance, and none is ever answered a record
	// older than one it was answered before (unless the answer says it
	// lags).
	Membership bool
	// Proposals adds the firm's proposals as engagements, kept by the
	// ledger's sync as the Xero ledger keeps its quotes: listed in id
	// order and polled by modification time, with no webhooks, created,
	// sent, accepted, edited and accepted again, declined, ended and
	// deleted while they are read. The mapping makes each an engagement
	// and remembers signings in the upstream state store every instance
	// shares; Result.Recorded and Result.AcceptedLate are what a test
	// checks the signings with.
	Proposals Proposals
	// QuickBooksEstimates, with QuickBooksInvoices and Proposals, makes the
	// proposals QuickBooks Online's estimates: the ledger's one sync keeps
	// invoices and engagements, and its one change data capture call
	// answers both (the engagements as the page's Others).
	QuickBooksEstimates bool
	// Stamped makes the jobs publish no modification time, as Karbon's
	// work items: the adapter stamps each job it reads (practice/stamps)
	// in the upstream state store both instances share, each instance on
	// a clock a few milliseconds off the other's, and the stamps survive
	// restarts. Every change must reach the copy and the change records
	// with a greater version, whichever instance reads it first.
	Stamped bool
}

// Result is what a run did and found.
type Result struct {
	Seed uint64
	// Operations counts the events run: vendor changes, webhook
	// deliveries, sync rounds, clock steps, trims, restarts and reads.
	Operations int
	// Changes counts the change records raised.
	Changes int
	// Divergences are the invariants broken, empty when none.
	Divergences []string
	// Recorded are the change records (Proposals), in recording order.
	Recorded []practice.Change
	// AcceptedLate are the proposals accepted at the vendor at the end
	// whose first acceptance came after the ledger's backfill had ended
	// (Proposals): each must have been announced signed. (One accepted
	// before is the same signing whenever it is accepted again, and was
	// there before the gateway: it is announced only if the gateway saw
	// it taken back.)
	AcceptedLate []string
}

type world struct {
	o Options
	// kinds are every kind the vendor has, the ledger's too.
	kinds  []practice.Kind
	r      *rand.Rand
	now    time.Time
	store  *Store
	vendor *Vendor
	// ledger is how the ledger's adapter reads the vendor's invoices:
	// the vendor, or its change data capture.
	ledger practice.Reader
	inst   [2]*instance
	// changes are every change record, in recording order.
	changes []practice.Change
	// deleted are the records the vendor deleted ("<kind>/<id>").
	deleted  []string
	webhooks []notice
	delayed  []delivery
	depth    int
	quiet    bool
	failures int
	ops      int
	nextID   int
	restarts int
	// seen is, per instance, the records it has served: each must stay
	// readable while the vendor has it.
	seen [2]map[string]bool
	// invoicesFrom is the vendor's version when the ledger's checkpoint
	// first said invoices were backfilled: every invoice created after it
	// must be announced, whichever way it is first noticed.
	invoicesFrom int64
	// engagementsFrom is the same for proposals, and accepted the
	// vendor's version at each proposal's first acceptance.
	engagementsFrom int64
	accepted        map[string]int64
	// upstream is the upstream state store every instance shares
	// (Redis), where the signings are remembered (Proposals).
	upstream changes.StateStore
	div      []string
	// served is, per caller, the newest version of each record it was
	// answered (Membership).
	served [3]map[string]int64
	// skew is how far instance 1's clock is off the world's (Stamped).
	skew time.Duration
}

// skewed is an instance's clock, off the world's by skew.
type skewed struct {
	w    *world
	skew time.Duration
}

func (c skewed) Now() time.Time { return c.w.now.Add(c.skew) }

type instance struct {
	model *readmodel.Model
	rec   *changes.Recorder
	// syncers are the records' and, with invoices, the ledger's.
	syncers []*readmodel.Syncer
	busy    bool
	bg      []func(context.Context)
	holder  string
	// reader reads the vendor as the records system's adapter does: the
	// vendor, or its jobs stamped (Stamped).
	reader practice.Reader
	// away is set while the instance does not hold the firm (Membership):
	// its syncs do not run, and its copy is unloaded between steps.
	away bool
}

// notice is a vendor webhook: which record, and whether it is new.
type notice struct {
	kind    practice.Kind
	id      string
	created bool
	at      time.Time
}

// delivery is a webhook's re-read of the record, not yet observed.
type delivery struct {
	to  int
	obs changes.Observation
}

func (w *world) Now() time.Time { return w.now }

func (w *world) Publish(_ context.Context, c practice.Change) error {
	w.changes = append(w.changes, c)
	w.trace("change %s of %s: %s (before %s)", c.ID, c.ResourceID, c.After, c.Before)
	return nil
}

func (w *world) trace(format string, args ...any) {
	if w.o.Trace != nil {
		w.o.Trace("%s op %d: "+format, append([]any{w.now.Format("15:04:05"), w.ops}, args...)...)
	}
}

func (w *world) diverge(format string, args ...any) {
	msg := fmt.Sprintf("seed %d op %d: ", w.o.Seed, w.ops) + fmt.Sprintf(format, args...)
	w.trace("DIVERGENCE %s", msg)
	w.div = append(w.div, msg)
}

// Run runs one schedule.
func Run(o Options) Result {
	if o.Events <= 0 {
		o.Events = 300
	}
	w := &world{o: o, r: rand.New(rand.NewPCG(o.Seed, 0x5eed)), now: start, kinds: kinds,
		accepted: map[string]int64{}, upstream: changes.NewMemoryState()}
	if w.invoices() {
		w.kinds = append(slices.Clone(kinds), practice.Invoices)
	}
	if o.Proposals != nil {
		w.kinds = append(slices.Clone(w.kinds), practice.Engagements)
	}
	if o.Stamped {
		w.skew = time.Duration(w.r.IntN(7)-3) * time.Millisecond
	}
	w.store = NewStore(w.Now)
	w.vendor = NewVendor(w.Now, 3)
	w.vendor.Between = w.between
	w.vendor.Fail = w.fail
	w.ledger = w.vendor
	if o.QuickBooksInvoices {
		// A look-back that the clock's steps and pauses pass now and then,
		// and a cap that a busy spell reaches.
		w.ledger = CDC{Vendor: w.vendor, Kind: practice.Invoices, LookBack: 2 * time.Minute, Overlap: 5 * time.Second, Cap: 8}
	}
	for range 4 + w.r.IntN(8) {
		w.create(practice.Clients)
		w.create(practice.Jobs)
		if w.invoices() {
			w.create(practice.Invoices)
		}
		if o.Proposals != nil {
			w.create(practice.Engagements)
		}
	}
	w.webhooks = nil
	for i := range w.inst {
		w.seen[i] = map[string]bool{}
		w.start(i)
	}
	for c := range w.served {
		w.served[c] = map[string]int64{}
	}
	for range o.Events {
		w.event()
	}
	w.settle()
	w.check()
	res := Result{Seed: o.Seed, Operations: w.ops, Changes: len(w.changes), Divergences: w.div}
	if o.Proposals != nil {
		res.Recorded = w.changes
		for id, r := range w.vendor.Records(practice.Engagements) {
			if r.State == "ACCEPTED" && w.engagementsFrom != 0 && w.accepted[id] > w.engagementsFrom {
				res.AcceptedLate = append(res.AcceptedLate, id)
			}
		}
		slices.Sort(res.AcceptedLate)
	}
	return res
}

// invoices reports whether the firm's ledger is in the run.
func (w *world) invoices() bool { return w.o.KarbonInvoices || w.o.QuickBooksInvoices }

// start (re)starts instance i: a process with a new model loaded from
// the shared store and a new holder name, as after a kill.
func (w *world) start(i int) {
	in := &instance{}
	cfg := readmodel.Config{Firm: firm, Store: w.store, Updates: w.store,
		Background: func(run func(context.Context)) { in.bg = append(in.bg, run) }}
	if w.o.Proposals != nil || w.o.Stamped {
		cfg.Other = w.upstream
	}
	in.model = readmodel.New(cfg)
	in.reader = w.vendor
	if w.o.Stamped {
		// The adapter stamps through the model, the state store the
		// gateway gives adapters, which keeps them in the shared
		// upstream store; a restart makes a new adapter.
		in.reader = stamping{Vendor: w.vendor, stamps: stamps.New(in.model, skewed{w, w.skew * time.Duration(i)}, "sim", firm)}
	}
	// The proposals' adapter remembers signings through the model, the
	// state store the gateway gives adapters, which keeps them in the
	// shared upstream store.
	proposals := quotes{Vendor: w.vendor, state: in.model, mapping: w.o.Proposals}
	for _, k := range w.kinds {
		switch k {
		case practice.Invoices:
			in.model.Serve(k, w.ledger)
		case practice.Engagements:
			in.model.Serve(k, proposals)
		default:
			in.model.Serve(k, in.reader)
		}
	}
	if w.o.Membership && w.r.IntN(2) == 0 {
		// Started where the placement puts the firm elsewhere.
		in.model.MarkUnloaded()
		in.away = true
	} else if err := in.model.Load(context.Background()); err != nil {
		w.diverge("instance %d does not load: %v", i, err)
	}
	in.rec = &changes.Recorder{State: in.model, Clock: w}
	in.holder = fmt.Sprintf("inst-%d-%d", i, w.restarts)
	deps := readmodel.SyncDeps{Model: in.model, Recorder: in.rec, Sink: w, Checkpoints: w.store, Leases: w.store,
		Holder: in.holder}
	in.syncers = []*readmodel.Syncer{readmodel.NewSyncer(readmodel.SyncedSystem{Role: "records", System: "sim", Kinds: kinds, Reader: in.reader},
		deps, config, readmodel.WithClock(w.Now))}
	switch {
	case w.o.QuickBooksEstimates && w.o.QuickBooksInvoices && w.o.Proposals != nil:
		in.syncers = append(in.syncers, readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", System: "quickbooks",
			Kinds: []practice.Kind{practice.Invoices, practice.Engagements}, Reader: estimates{CDC: w.ledger.(CDC), quotes: proposals}},
			deps, config, readmodel.WithClock(w.Now)))
	case w.o.KarbonInvoices:
		in.syncers = append(in.syncers, readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", System: "karbon",
			Kinds: []practice.Kind{practice.Invoices}, Reader: w.vendor}, deps, config, readmodel.WithClock(w.Now)))
	case w.o.QuickBooksInvoices:
		in.syncers = append(in.syncers, readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", System: "quickbooks",
			Kinds: []practice.Kind{practice.Invoices}, Reader: w.ledger}, deps, config, readmodel.WithClock(w.Now)))
	case w.o.Proposals != nil:
		in.syncers = append(in.syncers, readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", System: "xero",
			Kinds: []practice.Kind{practice.Engagements}, Reader: proposals}, deps, config, readmodel.WithClock(w.Now)))
	}
	w.restarts++
	w.inst[i] = in
}

// between runs other events while a vendor call's answer is in flight.
func (w *world) between() {
	if w.quiet || w.depth >= 2 {
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	for range w.r.IntN(3) {
		w.event()
	}
}

func (w *world) fail() error {
	if w.failures > 0 {
		w.failures--
		return fmt.Errorf("sim vendor: %w", practice.ErrUnavailable)
	}
	return nil
}

// event runs one event the scheduler picks.
func (w *world) event() {
	w.ops++
	ctx := context.Background()
	switch n := w.r.IntN(100); {
	case n < 8:
		w.create(w.kinds[w.r.IntN(len(w.kinds))])
	case n < 20:
		w.update(w.kinds[w.r.IntN(len(w.kinds))])
	case n < 25:
		w.remove(w.kinds[w.r.IntN(len(w.kinds))])
	case n < 37:
		w.deliverNotice(ctx)
	case n < 45:
		w.deliverDelayed(ctx)
	case n < 70:
		w.tick(ctx, w.r.IntN(2))
	case n < 80:
		d := time.Duration(1+w.r.IntN(20)) * time.Second
		if w.r.IntN(8) == 0 {
			d = config.LeaseTTL + 15*time.Second // a pause longer than a lease
		}
		w.now = w.now.Add(d)
		w.trace("clock +%v", d)
	case n < 83:
		keep := w.r.IntN(4)
		w.store.Trim(firm, keep)
		w.trace("feed trimmed to %d", keep)
	case n < 85:
		if i := w.r.IntN(2); !w.inst[i].busy {
			w.trace("instance %d restarted", i)
			w.start(i)
		}
	case n < 90:
		w.background(ctx, w.r.IntN(2))
	case n < 94:
		w.read(ctx, w.r.IntN(2))
	case n < 98 && w.o.Membership:
		w.membership(ctx, w.r.IntN(2))
	case n < 98:
		w.read(ctx, w.r.IntN(2))
	default:
		w.failures = 1 + w.r.IntN(3)
		w.trace("vendor fails the next %d calls", w.failures)
	}
}

func (w *world) create(k practice.Kind) {
	w.nextID++
	id := fmt.Sprintf("%s%03d", k.IDPrefix(), w.nextID)
	if k == practice.Engagements {
		w.propose(id, "First", []string{"DRAFT", "SENT"}[w.r.IntN(2)])
		return
	}
	w.vendor.Put(k, id, "First")
	w.trace("vendor creates %s", id)
	w.notify(k, id, true)
}

func (w *world) pick(k practice.Kind) (string, bool) {
	ids := w.vendor.IDs(k)
	if len(ids) == 0 {
		return "", false
	}
	return ids[w.r.IntN(len(ids))], true
}

func (w *world) update(k practice.Kind) {
	id, ok := w.pick(k)
	if !ok {
		return
	}
	if k == practice.Engagements {
		// An edit keeps the state (an accepted quote edited stays
		// accepted); otherwise the quote moves on, acceptance most often
		// and again after a decline or a return to sent.
		state := w.vendor.Records(k)[id].State
		if w.r.IntN(3) != 0 {
			state = pickState(w.r)
		}
		w.propose(id, fmt.Sprintf("Name%d", w.r.IntN(1000)), state)
		return
	}
	r := w.vendor.Put(k, id, fmt.Sprintf("Name%d", w.r.IntN(1000)))
	w.trace("vendor changes %s to version %d", id, r.Version)
	w.notify(k, id, false)
}

func (w *world) remove(k practice.Kind) {
	id, ok := w.pick(k)
	if !ok {
		return
	}
	w.vendor.Delete(k, id)
	w.deleted = append(w.deleted, string(k)+"/"+id)
	w.trace("vendor deletes %s", id)
	// Karbon tells a deletion (Deleted), Intuit an invoice's; a Karbon
	// invoice's is told by nothing, and the reconciliation finds it.
	if k != practice.Invoices || w.o.QuickBooksInvoices {
		w.notify(k, id, false)
	}
}

// propose puts a proposal in state at the vendor, minding its first
// acceptance.
func (w *world) propose(id, name, state string) {
	was := w.vendor.Records(practice.Engagements)[id].State
	r := w.vendor.PutState(practice.Engagements, id, name, state)
	if _, ok := w.accepted[id]; !ok && state == "ACCEPTED" && was != "ACCEPTED" {
		w.accepted[id] = r.Version
	}
	w.trace("vendor puts proposal %s %s at version %d", id, state, r.Version)
}

// pickState is a state a quote moves to, as Xero's quotes have them.
func pickState(r *rand.Rand) string {
	return []string{"DRAFT", "SENT", "SENT", "ACCEPTED", "ACCEPTED", "ACCEPTED", "DECLINED", "INVOICED", "DELETED"}[r.IntN(9)]
}

// notify sends the vendor's webhook, unless it is lost. Karbon's Invoice
// webhook tells every change as Updated; proposals have none (Xero sends
// no webhook for quotes, XPM none at all).
func (w *world) notify(k practice.Kind, id string, created bool) {
	if w.r.IntN(4) == 0 || k == practice.Engagements {
		return
	}
	if k == practice.Invoices && w.o.KarbonInvoices {
		created = false
	}
	w.webhooks = append(w.webhooks, notice{kind: k, id: id, created: created, at: w.now})
}

// deliverNotice delivers a pending webhook, in any order, to either
// instance: the adapter re-reads the record and observes it, at once or
// later. A webhook may be delivered again.
func (w *world) deliverNotice(ctx context.Context) {
	if len(w.webhooks) == 0 {
		return
	}
	i := w.r.IntN(len(w.webhooks))
	n := w.webhooks[i]
	if w.r.IntN(5) != 0 {
		w.webhooks = append(w.webhooks[:i], w.webhooks[i+1:]...)
	}
	to := w.r.IntN(2)
	if n.kind == practice.Invoices && (w.o.KarbonInvoices || w.o.QuickBooksInvoices && !n.created) {
		// The Karbon adapter leaves an invoice its instance has not seen
		// to the sync, reading nothing for it; the QuickBooks adapter
		// does so unless the webhook tells the invoice's creation.
		seen, err := w.inst[to].rec.State.Last(ctx, changes.StateKey(tenant, n.kind, n.id))
		if err != nil || seen == nil {
			w.trace("webhook for %s to %d: never seen, left to the sync (%v)", n.id, to, err)
			return
		}
	}
	readAt := w.now
	raw, err := w.inst[to].reader.Get(ctx, tenant, n.kind, n.id)
	if errors.Is(err, practice.ErrNotFound) {
		// Gone (the notification of its deletion, or one of a change
		// before it): the adapter removes it on the vendor's word.
		published, err := w.inst[to].rec.Remove(ctx, w, changes.Removal{Tenant: tenant, Kind: n.kind, ResourceID: n.id, At: w.now})
		w.trace("webhook for %s to %d: not found, removed: published %t, %v", n.id, to, published, err)
		if err != nil {
			w.webhooks = append(w.webhooks, n)
		}
		return
	}
	if err != nil {
		w.trace("webhook for %s to %d: re-read fails: %v", n.id, to, err)
		return
	}
	o := changes.Observation{Tenant: tenant, Kind: n.kind, ResourceID: n.id, After: raw, Created: n.created,
		Version: n.at.Format(time.RFC3339Nano), OccurredAt: n.at, ReadAt: readAt}
	if w.r.IntN(3) == 0 {
		w.trace("webhook for %s to %d: re-read held back", n.id, to)
		w.delayed = append(w.delayed, delivery{to: to, obs: o})
		return
	}
	w.observe(ctx, to, o)
}

func (w *world) deliverDelayed(ctx context.Context) {
	if len(w.delayed) == 0 {
		return
	}
	i := w.r.IntN(len(w.delayed))
	d := w.delayed[i]
	w.delayed = append(w.delayed[:i], w.delayed[i+1:]...)
	w.observe(ctx, d.to, d.obs)
}

func (w *world) observe(ctx context.Context, to int, o changes.Observation) {
	published, err := w.inst[to].rec.Observe(ctx, w, o)
	w.trace("instance %d observes %s: published %t, %v", to, o.After, published, err)
	if err != nil {
		// The webhook answered 5xx: the vendor sends it again.
		w.webhooks = append(w.webhooks, notice{kind: o.Kind, id: o.ResourceID, created: o.Created, at: o.OccurredAt})
	}
}

func (w *world) tick(ctx context.Context, i int) bool {
	in := w.inst[i]
	if in.busy || in.away {
		return false
	}
	s := in.syncers[0]
	if len(in.syncers) > 1 {
		s = in.syncers[w.r.IntN(len(in.syncers))]
	}
	return w.tickSyncer(ctx, i, s)
}

// tickSyncer runs one round of one of instance i's syncs.
func (w *world) tickSyncer(ctx context.Context, i int, s *readmodel.Syncer) bool {
	in := w.inst[i]
	if in.busy {
		return false
	}
	in.busy = true
	defer func() { in.busy = false }()
	held, more := s.Tick(ctx)
	w.trace("instance %d ticks %s: held %t, more %t", i, s.Role(), held, more)
	if w.invoices() && w.invoicesFrom == 0 && w.backfilled(ctx, practice.Invoices) {
		w.invoicesFrom = w.vendor.version
		w.trace("the ledger's checkpoint says invoices are backfilled, at vendor version %d", w.invoicesFrom)
	}
	if w.o.Proposals != nil && w.engagementsFrom == 0 && w.backfilled(ctx, practice.Engagements) {
		w.engagementsFrom = w.vendor.version
		w.trace("the ledger's checkpoint says engagements are backfilled, at vendor version %d", w.engagementsFrom)
	}
	return held && more
}

func (w *world) background(ctx context.Context, i int) {
	in := w.inst[i]
	if len(in.bg) == 0 {
		return
	}
	run := in.bg[0]
	in.bg = in.bg[1:]
	w.trace("instance %d catches up in the background", i)
	run(ctx)
}

// read reads every record the vendor has from instance i once the
// instance has backfilled its kind: one it has served before must not be
// missing.
func (w *world) read(ctx context.Context, i int) {
	m := w.inst[i].model
	if w.o.Membership {
		w.callerRead(ctx, i)
		defer w.unloadAway(i)
	}
	for _, k := range w.kinds {
		if f, _ := m.Freshness(k); !f.Backfilled {
			continue
		}
		for _, id := range w.vendor.IDs(k) {
			key := string(k) + "/" + id
			_, err := m.Get(ctx, tenant, k, id)
			switch {
			case err == nil:
				w.seen[i][key] = true
			case errors.Is(err, practice.ErrNotFound) && w.seen[i][key]:
				w.diverge("instance %d: %s exists in the vendor and was served, now reads as not found", i, key)
			case !errors.Is(err, practice.ErrNotFound) && w.seen[i][key]:
				// A record not copied yet is read from the vendor, which
				// may fail; one served before must be served from the copy.
				w.diverge("instance %d: reading %s: %v", i, key, err)
			}
		}
	}
}

// settle lets what is in flight arrive, then keeps the vendor quiet for
// a poll interval and a reconciliation while both instances sync.
func (w *world) settle() {
	ctx := context.Background()
	for len(w.delayed) > 0 {
		w.deliverDelayed(ctx)
	}
	for len(w.webhooks) > 0 {
		w.deliverNotice(ctx)
	}
	w.quiet, w.failures = true, 0
	if w.inst[0].away && w.inst[1].away {
		// The placement puts the firm somewhere.
		w.inst[w.r.IntN(2)].away = false
	}
	until := w.now.Add(config.Poll + config.Reconcile + 3*config.LeaseTTL)
	for w.now.Before(until) {
		w.now = w.now.Add(5 * time.Second)
		for i := range w.inst {
			for len(w.inst[i].bg) > 0 {
				w.background(ctx, i)
			}
			for _, s := range w.inst[i].syncers {
				if w.inst[i].away {
					// An instance that does not hold the firm reads
					// its holder's checkpoints, for what it reports.
					s.Load(ctx)
					continue
				}
				for n := 0; n < 100 && w.tickSyncer(ctx, i, s); n++ {
				}
			}
		}
		w.ops++
	}
	for i := range w.inst {
		w.read(ctx, i)
		for len(w.inst[i].bg) > 0 {
			w.background(ctx, i)
		}
	}
}

// check compares each instance's model with the vendor, and reads the
// change records in recording order.
func (w *world) check() {
	ctx := context.Background()
	for i, in := range w.inst {
		if err := in.model.CatchUp(ctx); err != nil {
			w.diverge("instance %d does not catch up: %v", i, err)
		}
		for _, k := range w.kinds {
			if f, _ := in.model.Freshness(k); f.State != readmodel.StateLive {
				var why []string
				for _, s := range in.syncers {
					why = append(why, s.Status().Why)
				}
				w.diverge("instance %d: %s is %s after the quiet, not live: %v", i, k, f.State, why)
			}
			got := map[string]string{}
			q := practice.Query{Limit: 500}
			for {
				p, err := in.model.List(ctx, tenant, k, q)
				if err != nil {
					w.diverge("instance %d lists %s: %v", i, k, err)
					break
				}
				for _, raw := range p.Items {
					var v struct{ ID string }
					_ = json.Unmarshal(raw, &v)
					got[v.ID] = string(raw)
				}
				if !p.HasMore {
					break
				}
				q.Cursor = p.Next
			}
			want := w.vendor.Records(k)
			for id, r := range want {
				wantRaw := r.JSON()
				if k == practice.Engagements {
					var err error
					if wantRaw, err = w.o.Proposals(ctx, in.model, r); err != nil {
						w.diverge("the mapping of %s: %v", id, err)
					}
				}
				if k == practice.Jobs && w.o.Stamped {
					w.checkStamped(ctx, i, id, got[id], wantRaw)
					continue
				}
				if got[id] != string(wantRaw) {
					w.diverge("instance %d: %s %s is %q, the vendor has %s", i, k, id, got[id], wantRaw)
				}
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					w.diverge("instance %d: %s %s is served, the vendor has deleted it", i, k, id)
				}
			}
		}
	}
	w.checkChanges()
	w.checkRaised()
	w.checkRemovals(ctx)
}

// checkStamped compares a stamped job an instance holds with the vendor's:
// the same content, and the version the shared stamp of that content has,
// as an instance started now reads it.
func (w *world) checkStamped(ctx context.Context, i int, id, got string, want json.RawMessage) {
	held, err := unstamped(json.RawMessage(got))
	if err != nil {
		w.diverge("instance %d: job %s is %q: %v", i, id, got, err)
		return
	}
	vendor, _ := unstamped(want)
	a, _ := json.Marshal(held)
	b, _ := json.Marshal(vendor)
	if !bytes.Equal(a, b) {
		w.diverge("instance %d: job %s is %s, the vendor has %s", i, id, a, b)
		return
	}
	fresh := stamps.New(w.upstream, skewed{w, 0}, "sim", firm)
	st, err := fresh.Of(ctx, stamps.Read{Kind: practice.Jobs, ID: id, Content: vendor, Began: w.now})
	var v struct{ Version int64 }
	_ = json.Unmarshal([]byte(got), &v)
	if err != nil || v.Version != st.Version() {
		w.diverge("instance %d: job %s is at version %d, its stamp is at %d (%v)", i, id, v.Version, st.Version(), err)
	}
}

// checkRemovals: every record the vendor deleted that the shared copy
// held (its tombstone is there) had its removal announced, and once
// (checkChanges says it was not twice), whichever of a notification, a
// change feed or a reconciliation found it.
func (w *world) checkRemovals(ctx context.Context) {
	announced := map[string]bool{}
	for _, c := range w.changes {
		if string(c.After) == "null" {
			announced[string(c.Kind)+"/"+c.ResourceID] = true
		}
	}
	held := map[string]bool{}
	_ = w.store.Load(ctx, firm, func(u readmodel.Update) error {
		held[string(u.Kind)+"/"+u.ID] = true
		return nil
	})
	for _, key := range w.deleted {
		if held[key] && !announced[key] {
			w.diverge("%s was removed without a word: its tombstone is kept, no change record says it", key)
		}
	}
}

// backfilled reads the ledger sync's checkpoint of k, the progress
// every instance resumes from: a backfill an instance ended but could not
// save (its lease lost) is done again, and takes what it finds silently.
func (w *world) backfilled(ctx context.Context, k practice.Kind) bool {
	b, err := w.store.Checkpoint(ctx, "sync/"+firm+"/ledger")
	if err != nil || b == nil {
		return false
	}
	var p struct {
		Kinds map[practice.Kind]struct {
			Backfilled bool `json:"backfilled"`
		} `json:"kinds"`
	}
	return json.Unmarshal(b, &p) == nil && p.Kinds[k].Backfilled
}

// checkRaised finds a change record of its creation for every invoice the
// vendor has that was created after the backfill: an invoice created
// since must reach receivers as raised, even when Karbon's webhook, which
// tells it as an update, comes before any poll.
func (w *world) checkRaised() {
	if !w.invoices() || w.invoicesFrom == 0 {
		return
	}
	created := map[string]bool{}
	for _, c := range w.changes {
		if c.Kind == practice.Invoices && c.Before == nil {
			created[c.ResourceID] = true
		}
	}
	for id := range w.vendor.Records(practice.Invoices) {
		if w.vendor.created[string(practice.Invoices)+"/"+id] > w.invoicesFrom && !created[id] {
			w.diverge("invoice %s, created after the backfill, was never announced", id)
		}
	}
}

// checkChanges reads the change records as a receiver that drops a
// repeated id would: each record's states only move forward, and each
// state is raised once.
func (w *world) checkChanges() {
	type state struct {
		version int64
		removed bool
	}
	last := map[string]*state{}
	ids := map[string]bool{}
	for _, c := range w.changes {
		if ids[c.ID] {
			continue
		}
		ids[c.ID] = true
		key := string(c.Kind) + "/" + c.ResourceID
		st := last[key]
		if st == nil {
			st = &state{}
			last[key] = st
		}
		if string(c.After) == "null" {
			if st.removed {
				w.diverge("%s removed twice (change %s)", key, c.ID)
			}
			st.removed = true
			continue
		}
		var v struct{ Version int64 }
		_ = json.Unmarshal(c.After, &v)
		switch {
		case st.removed:
			w.diverge("%s comes back at version %d after its removal (change %s)", key, v.Version, c.ID)
		case v.Version <= st.version:
			w.diverge("%s goes from version %d to %d (change %s)", key, st.version, v.Version, c.ID)
		}
		st.version = max(st.version, v.Version)
	}
}

// membership makes instance i let go of the firm, or hold it again.
func (w *world) membership(ctx context.Context, i int) {
	in := w.inst[i]
	if in.busy {
		return
	}
	if in.away {
		w.trace("instance %d holds the firm again", i)
		in.away = false
		return
	}
	// A hand-over: its syncs stop and give up their leases, then its copy
	// goes; the firm is answered from the shared store meanwhile.
	in.away = true
	for _, s := range in.syncers {
		_ = w.store.Release(ctx, "sync/"+firm+"/"+s.Role(), in.holder)
	}
	in.model.Unload()
	w.trace("instance %d lets go of the firm", i)
}

// unloadAway unloads the copy an instance that does not hold the firm
// loaded to answer, as the placement's next round does.
func (w *world) unloadAway(i int) {
	if in := w.inst[i]; in.away {
		in.model.Unload()
	}
}

// callerRead is a read by one of three callers through instance i, of a
// record the vendor has: an answer not marked lagging is never older
// than one the caller had before, through either instance.
func (w *world) callerRead(ctx context.Context, i int) {
	c := w.r.IntN(len(w.served))
	k := w.kinds[w.r.IntN(len(w.kinds))]
	ids := w.vendor.IDs(k)
	if len(ids) == 0 {
		return
	}
	id := ids[w.r.IntN(len(ids))]
	m := w.inst[i].model
	raw, err := m.Get(ctx, tenant, k, id)
	if err != nil {
		return
	}
	if f, _ := m.Freshness(k); f.State == readmodel.StateLagging && !w.inst[i].away {
		return
	}
	var v struct{ Version int64 }
	_ = json.Unmarshal(raw, &v)
	key := string(k) + "/" + id
	if v.Version < w.served[c][key] {
		w.diverge("caller %d reads %s at version %d through instance %d, after version %d", c, key, v.Version, i, w.served[c][key])
	}
	w.served[c][key] = max(w.served[c][key], v.Version)
	w.trace("caller %d reads %s at version %d through instance %d", c, key, v.Version, i)
}
