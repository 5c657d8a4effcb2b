package readmodel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// The sync's states, as /readyz, the console and the metrics show them.
const (
	StateBackfilling = "backfilling"
	StateLive        = "live"
	StateLagging     = "lagging"
	StateFailing     = "failing"
)

// Defaults of SyncConfig.
const (
	defaultPoll      = time.Minute
	defaultReconcile = 24 * time.Hour
	defaultLeaseTTL  = 30 * time.Second
	// pageLimit is how many records the sync asks an adapter for at a
	// time; the adapter reads the vendor's pages at the vendor's size.
	pageLimit = 200
	// pollOverlap is how far before the last poll's start the next poll
	// asks from, so that a change stamped by a vendor clock a little
	// behind ours, or committed late, is not passed over. Records seen
	// again unchanged cost nothing.
	pollOverlap = 2 * time.Minute
	// maxFeedPages bounds one round of a vendor's change feed.
	maxFeedPages = 50
)

// SyncConfig is how often a sync looks.
type SyncConfig struct {
	// Poll is the interval of incremental polling (and of reading a
	// vendor's change feed); default one minute.
	Poll time.Duration
	// Reconcile is the interval of a full comparison that finds
	// deletions and anything the feeds dropped; default a day.
	Reconcile time.Duration
	// LeaseTTL is how long an instance holds a system's sync without
	// renewing it; default 30 s.
	LeaseTTL time.Duration
}

func (c SyncConfig) withDefaults() SyncConfig {
	if c.Poll <= 0 {
		c.Poll = defaultPoll
	}
	if c.Reconcile <= 0 {
		c.Reconcile = defaultReconcile
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = defaultLeaseTTL
	}
	return c
}

// Syncer keeps one firm system's kinds of a Model current. Every instance
// runs one per firm system; the one holding the lease syncs, the others
// read its checkpoint, so that every instance tells the same freshness.
// NewSyncer makes one.
type Syncer struct {
	sys SyncedSystem
	// vendorFeed is the vendor's change feed, when the system's adapter
	// has one; it replaces polling.
	vendorFeed  ChangeFeed
	model       *Model
	recorder    *changes.Recorder
	sink        changes.ChangeSink
	checkpoints Checkpoints
	leases      Leases
	holder      string
	config      SyncConfig
	logger      *zap.Logger
	clock       func() time.Time
	// vendorCalls counts the requests sent to the vendor, for the
	// status; budgetPerHour is the vendor's published limit (0: unknown).
	vendorCalls   func() uint64
	budgetPerHour int
	// budget is what the sync plans to spend of the vendor's allowances
	// (plan.go).
	budget SyncBudget

	mu       sync.Mutex
	progress progress
	holding  bool
	calls    callWindow
	wake     chan struct{}
	plan     planner
	// bell rings the reads a vendor's notification asks for (Wake);
	// wokenAt is when the first wake not yet served came.
	bell    chan struct{}
	wokenAt time.Time
	// feedMu lets one read of the change feed run at a time: the polls'
	// and a notification's.
	feedMu sync.Mutex
	// latency keeps how long notifications took to become change
	// records (WithLatency).
	latency *Latency
}

// SyncedSystem is the firm system a Syncer reads.
type SyncedSystem struct {
	// Role is what the system is to the firm (records, ledger,
	// documents); System is which system it is ("karbon"), and Label
	// names it for people ("Karbon"; System when empty).
	Role, System, Label string
	Kinds               []practice.Kind
	// Reader is the system's adapter: the vendor, not the model. When it
	// is also a ChangeFeed, the sync reads that instead of polling.
	Reader practice.Reader
}

// SyncDeps is where a Syncer puts what it reads and keeps its progress.
type SyncDeps struct {
	Model *Model
	// Recorder compares what is read with the model and raises change
	// records to Sink.
	Recorder *changes.Recorder
	Sink     changes.ChangeSink
	// Checkpoints and Leases are shared by every instance; Holder names
	// this instance in the lease.
	Checkpoints Checkpoints
	Leases      Leases
	Holder      string
}

// SyncOption sets what a Syncer needs only sometimes.
type SyncOption func(*Syncer)

// WithLogger logs the sync's steps to l.
func WithLogger(l *zap.Logger) SyncOption { return func(s *Syncer) { s.logger = l } }

// WithClock tells the sync the time; a simulation runs it on its own.
func WithClock(now func() time.Time) SyncOption { return func(s *Syncer) { s.clock = now } }

// WithVendorCalls reports the requests sent to the vendor, and its
// published limit an hour, in the sync's status.
func WithVendorCalls(sent func() uint64, perHour int) SyncOption {
	return func(s *Syncer) { s.vendorCalls, s.budgetPerHour = sent, perHour }
}

// WithBudget plans the sync's polls within b (plan.go).
func WithBudget(b SyncBudget) SyncOption { return func(s *Syncer) { s.budget = b } }

// NewSyncer makes the sync of sys into deps.Model, looking as often as
// cfg says (its zero fields are the defaults).
func NewSyncer(sys SyncedSystem, deps SyncDeps, cfg SyncConfig, opts ...SyncOption) *Syncer {
	s := &Syncer{
		sys: sys, model: deps.Model, recorder: deps.Recorder, sink: deps.Sink,
		checkpoints: deps.Checkpoints, leases: deps.Leases, holder: deps.Holder,
		config: cfg.withDefaults(), logger: zap.NewNop(),
		wake:     make(chan struct{}, 1),
		bell:     make(chan struct{}, 1),
		progress: progress{Kinds: map[practice.Kind]*kindProgress{}},
	}
	if s.sys.Label == "" {
		s.sys.Label = s.sys.System
	}
	if feed, ok := sys.Reader.(ChangeFeed); ok {
		s.vendorFeed = feed
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Role is what the synced system is to the firm; System which it is.
func (s *Syncer) Role() string   { return s.sys.Role }
func (s *Syncer) System() string { return s.sys.System }

// progress is a sync's checkpoint, saved after each step.
type progress struct {
	Holder string                          `json:"holder"`
	Kinds  map[practice.Kind]*kindProgress `json:"kinds"`
	// FeedCursor is where the vendor's change feed continues.
	FeedCursor string `json:"feed_cursor,omitempty"`
	// Error is the last step's failure, since ErrorSince; cleared by a
	// step that succeeds.
	Error      string    `json:"error,omitempty"`
	ErrorSince time.Time `json:"error_since,omitzero"`
	// ReconcileFrom is when a reconciliation was asked for ("resync
	// now", an expired feed); one starting after it answers it.
	ReconcileFrom time.Time `json:"reconcile_from,omitzero"`
	SavedAt       time.Time `json:"saved_at"`
	CallsLastHour uint64    `json:"calls_last_hour"`
	// Costs are the vendor calls each pass costs, which the plan of
	// polls is made from.
	Costs map[string]float64 `json:"costs,omitempty"`
	// SubscribedUntil is when the vendor's subscription the holder keeps
	// (a Subscriber's) lapses unless renewed; SubscribeError why the last
	// attempt to make or renew it failed.
	SubscribedUntil time.Time `json:"subscribed_until,omitzero"`
	SubscribeError  string    `json:"subscribe_error,omitempty"`
}

type kindProgress struct {
	Backfilled bool `json:"backfilled"`
	// Cursor is where the backfill continues after a restart.
	Cursor string `json:"cursor,omitempty"`
	// Seen counts records read in the current full pass; About is how
	// many the last full pass found.
	Seen  int `json:"seen"`
	About int `json:"about,omitempty"`
	// Watermark is the start of the last full pass or poll that ended:
	// the next poll asks for changes since (a little before) it.
	Watermark    time.Time `json:"watermark,omitzero"`
	ConfirmedAt  time.Time `json:"confirmed_at,omitzero"`
	ReconciledAt time.Time `json:"reconciled_at,omitzero"`
	// FullFrom is the start of the last full pass (backfill or
	// reconciliation) that ended: it answers a reconciliation asked for
	// before it, not one asked for while it listed, since it may have
	// read the pages a change asked about before the change.
	FullFrom time.Time `json:"full_from,omitzero"`
	PolledAt time.Time `json:"polled_at,omitzero"`
	// Error is this kind's last failure, since ErrorSince; the kind is
	// tried again at RetryAt while the others go on.
	Error      string    `json:"error,omitempty"`
	ErrorSince time.Time `json:"error_since,omitzero"`
	RetryAt    time.Time `json:"retry_at,omitzero"`
	// Unusable are the records the vendor listed whose answer could not
	// be used (practice.UnusableError), by id, with why: served as last
	// known, and asked for again at each of the kind's polls
	// (unusable.go); at most maxUnusable.
	Unusable map[string]string `json:"unusable,omitempty"`
	// Relink says the backfill under way left links for later
	// (practice.LinksLater): when it ends, the kind is reconciled at
	// once to make them.
	Relink bool `json:"relink,omitempty"`
}

// fullFrom is when the last full pass that ended started; a checkpoint
// saved before passes kept their start has only their end.
func (kp *kindProgress) fullFrom() time.Time {
	if kp.FullFrom.IsZero() {
		return kp.ReconciledAt
	}
	return kp.FullFrom
}

func (s *Syncer) now() time.Time {
	if s.clock != nil {
		return s.clock().UTC()
	}
	return time.Now().UTC()
}

func (s *Syncer) name() string      { return syncName(s.model.Firm(), s.sys.Role) }
func (s *Syncer) resyncKey() string { return s.name() + resyncSuffix }
func (s *Syncer) tenant() practice.Tenant {
	return practice.Tenant{Firm: s.model.Firm()}
}

// incremental reports whether a poll of k asks the vendor only for what
// changed since the last one: with a change feed the feed is read
// instead; an adapter that is not Incremental filters every kind by
// modification time. Every other kind is polled too, each poll a listing
// of all its records, spaced by the plan (plan.go): webhooks bring its
// changes sooner, never alone.
func (s *Syncer) incremental(k practice.Kind) bool {
	inc, ok := s.sys.Reader.(Incremental)
	return !ok || inc.Incremental(k)
}

// interval is how often k's records are confirmed against the vendor:
// the configured poll interval is a floor, the plan (plan.go) spaces
// polls to keep within the vendor's allowances, and the reconciliation's
// interval is a ceiling.
func (s *Syncer) interval(k practice.Kind) time.Duration { return s.pollEvery(k) }

// Run syncs until ctx ends: it takes the lease when it is free, and works
// while it holds it; otherwise it follows the holder's checkpoint.
func (s *Syncer) Run(ctx context.Context) {
	defer func() {
		s.mu.Lock()
		held := s.holding
		s.mu.Unlock()
		if held {
			// A fresh context: ctx has ended, and the release is what
			// lets another instance take over at once.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = s.leases.Release(rctx, s.name(), s.holder)
		}
	}()
	s.followHolder(ctx)
	// What notifications ask for is read beside the steps, however long
	// one takes.
	wctx, stop := context.WithCancel(ctx)
	var wakes sync.WaitGroup
	wakes.Add(1)
	go func() { defer wakes.Done(); s.serveWakes(wctx) }()
	defer func() { stop(); wakes.Wait() }()
	for ctx.Err() == nil {
		held, more, stepErr := s.round(ctx, s.whileHeld)
		switch {
		case !held:
			// Following is a read of one checkpoint: often enough that
			// this instance reports what the holder does within a second.
			s.sleep(ctx, time.Second)
		case stepErr != nil && !errors.Is(stepErr, errLeaseLost):
			// A failing vendor is not asked again at once.
			s.sleep(ctx, min(s.config.Poll, 5*time.Second))
		case !more:
			s.sleep(ctx, s.untilDue())
		}
	}
}

// Tick is one round of Run without its waits and without renewing the
// lease in the background: it takes or renews the lease, then runs one
// step and saves its checkpoint, or follows the holder's. A simulation
// drives syncs with it on its own clock and schedule; held says this
// instance holds the lease, more that more work is due at once.
func (s *Syncer) Tick(ctx context.Context) (held, more bool) {
	held, more, _ = s.round(ctx, func(ctx context.Context, step func(context.Context) (bool, error)) (bool, error) {
		return step(ctx)
	})
	return held, more
}

// round is one turn of the sync: the lease, then a step run by run (with
// the lease renewed alongside, or not) and its checkpoint.
func (s *Syncer) round(ctx context.Context, run func(context.Context, func(context.Context) (bool, error)) (bool, error)) (held, more bool, err error) {
	held, err = s.leases.Lease(ctx, s.name(), s.holder, s.config.LeaseTTL)
	if err != nil && ctx.Err() == nil {
		s.logger.Warn("sync lease not taken", zap.String("sync", s.name()), zap.Error(err))
	}
	s.mu.Lock()
	took := held && !s.holding
	s.holding = held
	s.mu.Unlock()
	if !held || took || s.overtaken(ctx) {
		// Follow the holder, or resume from the last holder's checkpoint.
		s.followHolder(ctx)
	}
	if took {
		// A new holder reads at once what notifications left, and keeps
		// the vendor's subscription.
		select {
		case s.bell <- struct{}{}:
		default:
		}
	}
	if !held {
		return false, false, nil
	}
	more, err = run(ctx, s.step)
	s.record(ctx, err)
	return true, more, err
}

// Resync asks the holder, wherever it runs, to reconcile every kind now.
func (s *Syncer) Resync(ctx context.Context) error {
	b, _ := json.Marshal(s.now())
	if err := s.checkpoints.SaveCheckpoint(ctx, s.resyncKey(), b); err != nil {
		return err
	}
	s.poke()
	return nil
}

func (s *Syncer) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Syncer) sleep(ctx context.Context, d time.Duration) {
	d = min(max(d, 10*time.Millisecond), s.config.LeaseTTL/3)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-s.wake:
	}
}

// Load reads the sync's checkpoint before Run does, so that a sync made
// again over a copy (a reopened connection) says where it stands from its
// first Status rather than "backfilling" until Run has read it.
func (s *Syncer) Load(ctx context.Context) { s.followHolder(ctx) }

// followHolder reads the checkpoint into this instance's progress and the
// model's freshness.
func (s *Syncer) followHolder(ctx context.Context) {
	b, err := s.checkpoints.Checkpoint(ctx, s.name())
	if err != nil || b == nil {
		s.publish()
		return
	}
	var p progress
	if err := json.Unmarshal(b, &p); err != nil {
		s.logger.Warn("sync checkpoint unreadable; starting over", zap.String("sync", s.name()), zap.Error(err))
		s.publish()
		return
	}
	if p.Kinds == nil {
		p.Kinds = map[practice.Kind]*kindProgress{}
	}
	s.mu.Lock()
	s.progress = p
	s.mu.Unlock()
	s.plan.load(p.Costs)
	s.publish()
}

// overtaken reports whether the checkpoint is not the one this instance
// last saved: its lease expired (a pause), another instance held it and
// moved the sync on, and this one took it again without a gap it could
// see. Its own progress is then behind, and resuming it would redo a
// backfill the other ended, taking records created since silently.
func (s *Syncer) overtaken(ctx context.Context) bool {
	b, err := s.checkpoints.Checkpoint(ctx, s.name())
	if err != nil || b == nil {
		return false
	}
	var p struct {
		Holder  string    `json:"holder"`
		SavedAt time.Time `json:"saved_at"`
	}
	if json.Unmarshal(b, &p) != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.Holder != s.holder || !p.SavedAt.Equal(s.progress.SavedAt)
}

func (s *Syncer) kindProgress(k practice.Kind) *kindProgress {
	kp := s.progress.Kinds[k]
	if kp == nil {
		kp = &kindProgress{}
		s.progress.Kinds[k] = kp
	}
	return kp
}

// untilDue is how long until the next poll or reconciliation is due.
func (s *Syncer) untilDue() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	next := s.config.Poll
	for _, k := range s.sys.Kinds {
		kp := s.kindProgress(k)
		next = min(next, kp.ReconciledAt.Add(s.config.Reconcile).Sub(now))
		if !kp.RetryAt.IsZero() {
			next = min(next, kp.RetryAt.Sub(now))
		}
		next = min(next, kp.PolledAt.Add(s.interval(k)).Sub(now))
	}
	return next
}

// step does the next piece of work: a page of a backfill, a poll round or
// a reconciliation of one kind. more says there is more to do at once. A
// kind whose work fails is retried after a pause while the others go on:
// one kind's failure (a contacts listing whose next link repeats) keeps
// no other from being backfilled, polled and live.
func (s *Syncer) step(ctx context.Context) (more bool, err error) {
	// The polls are the safety net: they give way to notifications'
	// reads and clients' requests waiting for the vendor's allowance.
	ctx = practice.GivingWay(ctx)
	from, err := s.resyncAsked(ctx)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	if from.After(s.progress.ReconcileFrom) {
		s.progress.ReconcileFrom = from
	}
	s.mu.Unlock()
	now := s.now()
	for _, k := range s.sys.Kinds {
		s.mu.Lock()
		kp := *s.kindProgress(k)
		asked := s.progress.ReconcileFrom.After(kp.fullFrom())
		s.mu.Unlock()
		if now.Before(kp.RetryAt) {
			continue
		}
		var work func(context.Context) error
		switch {
		case !kp.Backfilled:
			work = func(ctx context.Context) error {
				return s.metered(passFull+string(k), kp.Cursor == "" && kp.Seen == 0, func() error { return s.backfillPage(ctx, k, kp) })
			}
		case asked || now.Sub(kp.ReconciledAt) >= s.config.Reconcile:
			work = func(ctx context.Context) error {
				return s.metered(passFull+string(k), true, func() error { return s.reconcile(ctx, k) })
			}
		case now.Sub(kp.PolledAt) >= s.interval(k):
			if s.vendorFeed != nil {
				// The feed covers every kind: its failure is the
				// system's.
				err := s.metered(passFeed, false, func() error { return s.readFeed(ctx) })
				if err == nil {
					s.vendorAnswered()
				}
				return true, err
			}
			work = func(ctx context.Context) error {
				return s.metered(passPoll+string(k), false, func() error { return s.poll(ctx, k, kp) })
			}
		default:
			continue
		}
		err := work(ctx)
		if errors.Is(err, errLeaseLost) || ctx.Err() != nil {
			return false, err
		}
		s.kindOutcome(k, err)
		if errors.Is(err, practice.ErrUnavailable) {
			// The vendor itself is down or refusing (an outage, its
			// budget spent): every kind is, as far as reads can tell,
			// until a read of any of them is answered.
			return true, err
		}
		s.vendorAnswered()
		return true, nil
	}
	return false, nil
}

// vendorAnswered clears the system's failure: a piece of work was
// answered by the vendor. Only that clears it, never a step that found
// nothing due, so that while the vendor fails every kind it serves says
// so, not only the kind whose poll came first.
func (s *Syncer) vendorAnswered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress.Error, s.progress.ErrorSince = "", time.Time{}
}

// kindOutcome records how k's last piece of work ended: a failure is
// k's alone, retried after a pause that grows while it keeps failing.
func (s *Syncer) kindOutcome(k practice.Kind, err error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	kp := s.kindProgress(k)
	if err == nil {
		kp.Error, kp.ErrorSince, kp.RetryAt = "", time.Time{}, time.Time{}
		return
	}
	if kp.Error == "" {
		kp.ErrorSince = now
	}
	kp.Error = err.Error()
	pause := min(max(now.Sub(kp.ErrorSince), 5*time.Second), s.config.Poll)
	kp.RetryAt = now.Add(pause)
	s.logger.Warn("sync of a kind failed", zap.String("sync", s.name()), zap.String("kind", string(k)), zap.Error(err))
}

func (s *Syncer) resyncAsked(ctx context.Context) (time.Time, error) {
	b, err := s.checkpoints.Checkpoint(ctx, s.resyncKey())
	if err != nil || b == nil {
		return time.Time{}, err
	}
	var t time.Time
	_ = json.Unmarshal(b, &t)
	return t, nil
}

// record saves the checkpoint after a step and publishes the freshness.
// The save is fenced by the lease: a step that ended after the lease was
// lost (a pause longer than its time to live) saves nothing over the new
// holder's progress.
func (s *Syncer) record(ctx context.Context, stepErr error) {
	if errors.Is(stepErr, errLeaseLost) || ctx.Err() != nil {
		return
	}
	now := s.now()
	s.mu.Lock()
	// A step without error leaves the system's failure as it is: the
	// step cleared it if the vendor answered (vendorAnswered).
	if stepErr != nil {
		if s.progress.Error == "" {
			s.progress.ErrorSince = now
		}
		s.progress.Error = stepErr.Error()
	}
	if s.vendorCalls != nil {
		count := s.vendorCalls()
		s.calls.add(now, count)
		s.progress.CallsLastHour = s.calls.sinceOldest(count)
	}
	s.progress.Holder, s.progress.SavedAt, s.progress.Costs = s.holder, now, s.plan.snapshot()
	b, err := json.Marshal(s.progress)
	// Reads are told of the step's outcome in the same critical section
	// as Status is, so the two never disagree.
	s.publishLocked()
	s.mu.Unlock()
	if stepErr != nil {
		s.logger.Warn("sync step failed", zap.String("sync", s.name()), zap.Error(stepErr))
	}
	saved := false
	if err == nil {
		saved, err = s.saveCheckpoint(ctx, b)
	}
	if err != nil && ctx.Err() == nil {
		s.logger.Warn("sync checkpoint not saved", zap.String("sync", s.name()), zap.Error(err))
	}
	if err == nil && !saved {
		s.logger.Warn("sync lease lost before the checkpoint was saved; the new holder's progress stands", zap.String("sync", s.name()))
		s.mu.Lock()
		s.holding = false
		s.mu.Unlock()
	}
}

// saveCheckpoint saves b as the sync's checkpoint while it holds the
// lease, and through the model's fence when it has one.
func (s *Syncer) saveCheckpoint(ctx context.Context, b []byte) (bool, error) {
	if fs, ok := s.checkpoints.(Fencer); ok && s.model.fence != nil {
		return fs.SaveFencedCheckpoint(ctx, *s.model.fence, s.name(), b, s.name(), s.holder)
	}
	return s.checkpoints.SaveHeldCheckpoint(ctx, s.name(), b, s.name(), s.holder)
}

// publish tells the model how fresh each kind is.
func (s *Syncer) publish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked()
}

// publishLocked is publish; the caller holds mu.
func (s *Syncer) publishLocked() {
	st := s.statusLocked()
	for _, ks := range st.Kinds {
		f := practice.Freshness{ConfirmedAt: ks.ConfirmedAt, Backfilled: ks.Backfilled, State: ks.State}
		if f.State == StateFailing {
			// Why holds the vendor's error; callers are told only that
			// the vendor fails the gateway.
			f.Reason = fmt.Sprintf("the gateway's calls to %s fail; this copy may be stale", cmp.Or(s.sys.Label, "the vendor"))
		}
		s.model.SetFreshness(ks.Kind, f)
	}
}

// callWindow keeps a sample of the vendor call counter a minute, to tell
// the calls of the last hour.
type callWindow struct {
	samples []callSample
}

type callSample struct {
	at    time.Time
	count uint64
}

func (w *callWindow) add(now time.Time, count uint64) {
	if n := len(w.samples); n == 0 || now.Sub(w.samples[n-1].at) >= time.Minute {
		w.samples = append(w.samples, callSample{now, count})
	}
	for len(w.samples) > 1 && now.Sub(w.samples[0].at) > time.Hour {
		w.samples = w.samples[1:]
	}
}

// sinceOldest is how many calls were made since the oldest sample kept,
// at most an hour ago.
func (w *callWindow) sinceOldest(count uint64) uint64 {
	if len(w.samples) == 0 {
		return 0
	}
	return count - min(w.samples[0].count, count)
}
