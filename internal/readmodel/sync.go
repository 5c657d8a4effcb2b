package readmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/changes"
	"github.com/practicegw/practicegw/internal/practice"
	"github.com/practicegw/practicegw/internal/recordindex"
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
	DefaultPoll      = time.Minute
	DefaultReconcile = 24 * time.Hour
	DefaultLeaseTTL  = 30 * time.Second
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
		c.Poll = DefaultPoll
	}
	if c.Reconcile <= 0 {
		c.Reconcile = DefaultReconcile
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	return c
}

// Syncer keeps one firm system's kinds of a Model current. Every instance
// runs one per firm system; the one holding the lease syncs, the others
// read its checkpoint, so that every instance tells the same freshness.
type Syncer struct {
	// System is the role the system plays for the firm (records, ledger,
	// documents); Vendor names the system ("karbon") and Label names it
	// for people ("Karbon").
	System, Vendor, Label string
	Kinds                 []practice.Kind
	// Reader is the system's adapter: the vendor, not the model.
	Reader practice.Reader
	// Feed is the vendor's change feed, when it has one; it replaces
	// polling.
	Feed        ChangeFeed
	Model       *Model
	Recorder    *changes.Recorder
	Sink        changes.ChangeSink
	Checkpoints Checkpoints
	Leases      Leases
	// Holder names this instance in the lease.
	Holder string
	Config SyncConfig
	Logger *zap.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Calls counts the requests sent to the vendor, for the status.
	Calls func() uint64
	// BudgetPerHour is the vendor's published limit, for the status; 0
	// when unknown.
	BudgetPerHour int
	// Budget is what the sync plans to spend of the vendor's allowances
	// (plan.go).
	Budget SyncBudget

	mu       sync.Mutex
	progress progress
	holding  bool
	calls    callWindow
	wake     chan struct{}
	once     sync.Once
	plan     planner
}

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
	PolledAt     time.Time `json:"polled_at,omitzero"`
}

func (s *Syncer) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Syncer) name() string      { return "sync/" + s.Model.Firm() + "/" + s.System }
func (s *Syncer) resyncKey() string { return s.name() + "/resync" }
func (s *Syncer) tenant() practice.Tenant {
	return practice.Tenant{Firm: s.Model.Firm()}
}

// polled reports whether k is polled: always with a change feed (which
// covers every kind), else when the adapter says its vendor can list k by
// modification time.
func (s *Syncer) polled(k practice.Kind) bool {
	if s.Feed != nil {
		return true
	}
	inc, ok := s.Reader.(Incremental)
	return !ok || inc.Incremental(k)
}

// interval is how often k's records are confirmed against the vendor:
// the configured poll interval is a floor, the plan (plan.go) spaces
// polls to keep within the vendor's allowances.
func (s *Syncer) interval(k practice.Kind) time.Duration {
	if s.polled(k) {
		return s.pollEvery(k)
	}
	return s.Config.Reconcile
}

func (s *Syncer) init() {
	s.once.Do(func() {
		s.Config = s.Config.withDefaults()
		s.wake = make(chan struct{}, 1)
		if s.Logger == nil {
			s.Logger = zap.NewNop()
		}
		if s.Label == "" {
			s.Label = s.System
		}
		s.progress = progress{Kinds: map[practice.Kind]*kindProgress{}}
	})
}

// Run syncs until ctx ends: it takes the lease when it is free, and works
// while it holds it; otherwise it follows the holder's checkpoint.
func (s *Syncer) Run(ctx context.Context) {
	s.init()
	defer func() {
		s.mu.Lock()
		held := s.holding
		s.mu.Unlock()
		if held {
			// A fresh context: ctx has ended, and the release is what
			// lets another instance take over at once.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = s.Leases.Release(rctx, s.name(), s.Holder)
		}
	}()
	s.follow(ctx)
	for ctx.Err() == nil {
		held, err := s.Leases.Lease(ctx, s.name(), s.Holder, s.Config.LeaseTTL)
		if err != nil && ctx.Err() == nil {
			s.Logger.Warn("sync lease not taken", zap.String("sync", s.name()), zap.Error(err))
		}
		s.mu.Lock()
		took := held && !s.holding
		s.holding = held
		s.mu.Unlock()
		if !held {
			// Following is a read of one checkpoint: often enough that
			// this instance reports what the holder does within a second.
			s.follow(ctx)
			s.sleep(ctx, time.Second)
			continue
		}
		if took {
			// Resume from the last holder's checkpoint.
			s.follow(ctx)
		}
		more, err := s.whileHeld(ctx, s.step)
		s.record(ctx, err)
		if !more {
			s.sleep(ctx, s.untilDue())
		}
	}
}

// whileHeld runs a step while renewing the lease every third of its time to
// live, so that a step longer than the lease (a page of clients read one
// by one within Karbon's budget) is not taken over half way; losing the
// lease ends the step with errLeaseLost.
func (s *Syncer) whileHeld(ctx context.Context, step func(context.Context) (bool, error)) (bool, error) {
	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(s.Config.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stepCtx.Done():
				return
			case <-t.C:
				if err := s.renew(stepCtx); err != nil && stepCtx.Err() == nil {
					cancel(err)
					return
				}
			}
		}
	}()
	more, err := step(stepCtx)
	cancel(nil)
	<-renewed
	if cause := context.Cause(stepCtx); err != nil && cause != nil && cause != context.Canceled && ctx.Err() == nil {
		return false, cause
	}
	return more, err
}

// Resync asks the holder, wherever it runs, to reconcile every kind now.
func (s *Syncer) Resync(ctx context.Context) error {
	s.init()
	b, _ := json.Marshal(s.now())
	if err := s.Checkpoints.SaveCheckpoint(ctx, s.resyncKey(), b); err != nil {
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
	d = min(max(d, 10*time.Millisecond), s.Config.LeaseTTL/3)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-s.wake:
	}
}

// follow reads the checkpoint into this instance's progress and the
// model's freshness.
func (s *Syncer) follow(ctx context.Context) {
	b, err := s.Checkpoints.Checkpoint(ctx, s.name())
	if err != nil || b == nil {
		s.publish()
		return
	}
	var p progress
	if err := json.Unmarshal(b, &p); err != nil {
		s.Logger.Warn("sync checkpoint unreadable; starting over", zap.String("sync", s.name()), zap.Error(err))
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
	next := s.Config.Poll
	for _, k := range s.Kinds {
		kp := s.kindProgress(k)
		next = min(next, kp.ReconciledAt.Add(s.Config.Reconcile).Sub(now))
		if s.polled(k) {
			next = min(next, kp.PolledAt.Add(s.interval(k)).Sub(now))
		}
	}
	return next
}

// step does the next piece of work: a page of a backfill, a poll round or
// a reconciliation of one kind. more says there is more to do at once.
func (s *Syncer) step(ctx context.Context) (more bool, err error) {
	for _, k := range s.Kinds {
		s.mu.Lock()
		kp := *s.kindProgress(k)
		s.mu.Unlock()
		if !kp.Backfilled {
			return true, s.metered(passFull+string(k), kp.Cursor == "" && kp.Seen == 0, func() error { return s.backfillPage(ctx, k, kp) })
		}
	}
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
	for _, k := range s.Kinds {
		s.mu.Lock()
		kp := *s.kindProgress(k)
		asked := s.progress.ReconcileFrom.After(kp.ReconciledAt)
		s.mu.Unlock()
		if asked || now.Sub(kp.ReconciledAt) >= s.Config.Reconcile {
			return true, s.metered(passFull+string(k), true, func() error { return s.reconcile(ctx, k) })
		}
	}
	for _, k := range s.Kinds {
		s.mu.Lock()
		kp := *s.kindProgress(k)
		s.mu.Unlock()
		if s.polled(k) && now.Sub(kp.PolledAt) >= s.interval(k) {
			if s.Feed != nil {
				return true, s.metered(passFeed, false, func() error { return s.readFeed(ctx) })
			}
			return true, s.metered(passPoll+string(k), false, func() error { return s.poll(ctx, k, kp) })
		}
	}
	return false, nil
}

func (s *Syncer) resyncAsked(ctx context.Context) (time.Time, error) {
	b, err := s.Checkpoints.Checkpoint(ctx, s.resyncKey())
	if err != nil || b == nil {
		return time.Time{}, err
	}
	var t time.Time
	_ = json.Unmarshal(b, &t)
	return t, nil
}

// backfillPage reads the next page of k's first full pass and keeps it.
// A record read for the first time raises nothing: it was there before
// the gateway looked.
func (s *Syncer) backfillPage(ctx context.Context, k practice.Kind, kp kindProgress) error {
	start := s.now()
	if kp.Cursor == "" && kp.Seen == 0 {
		kp.Watermark = start
		if s.Feed != nil && k == s.Kinds[0] {
			// The feed starts before the listing, so that a change made
			// while listing is read from it afterwards.
			page, err := s.Feed.Changes(ctx, s.tenant(), "")
			if err != nil {
				return fmt.Errorf("start %s change feed: %w", s.Label, err)
			}
			s.mu.Lock()
			s.progress.FeedCursor = page.Next
			s.mu.Unlock()
		}
	}
	page, err := s.Reader.List(ctx, s.tenant(), k, practice.Query{Cursor: kp.Cursor, Limit: pageLimit})
	var inv *practice.InvalidError
	if errors.As(err, &inv) && kp.Cursor != "" {
		// The adapter no longer continues from the saved cursor (a newer
		// version): start this kind's backfill again.
		s.Logger.Warn("backfill cursor refused; starting the kind again", zap.String("sync", s.name()),
			zap.String("kind", string(k)), zap.Error(err))
		kp.Cursor, kp.Seen = "", 0
		s.setKind(k, kp)
		return nil
	}
	if err != nil {
		return fmt.Errorf("backfill %s %s: %w", s.Label, k, err)
	}
	if err := s.keep(ctx, k, page.Items, false); err != nil {
		return err
	}
	kp.Seen += len(page.Items)
	if page.Total > 0 {
		kp.About = page.Total
	}
	if page.HasMore {
		if page.Next == "" || page.Next == kp.Cursor {
			return fmt.Errorf("backfill %s %s: the adapter's next cursor does not move: %w", s.Label, k, practice.ErrBadUpstream)
		}
		kp.Cursor = page.Next
		s.setKind(k, kp)
		return nil
	}
	// The first poll comes at once: it confirms what changed while the
	// backfill read, which may have taken hours.
	kp.Backfilled, kp.Cursor, kp.About = true, "", kp.Seen
	kp.ConfirmedAt, kp.PolledAt, kp.ReconciledAt = kp.Watermark, time.Time{}, s.now()
	s.setKind(k, kp)
	s.Logger.Info("backfill ended", zap.String("sync", s.name()), zap.String("kind", string(k)), zap.Int("records", kp.Seen))
	return nil
}

func (s *Syncer) setKind(k practice.Kind, kp kindProgress) {
	s.mu.Lock()
	*s.kindProgress(k) = kp
	s.mu.Unlock()
}

// keep compares records just read with the model. New and unchanged
// records of a backfill are written in one batch with no change record;
// every other difference goes through the Recorder, which raises exactly
// one change record for it and saves it in the model.
func (s *Syncer) keep(ctx context.Context, k practice.Kind, items []json.RawMessage, announceNew bool) error {
	var batch []Update
	for _, raw := range items {
		e, err := recordindex.NewEntry(raw)
		if err != nil {
			return fmt.Errorf("%s %s: %w: %w", s.Label, k, practice.ErrBadUpstream, err)
		}
		before := s.Model.find(s.Model.kinds[k], e.ID)
		switch {
		case before != nil && bytes.Equal(before, raw):
			continue
		case before == nil && !announceNew:
			batch = append(batch, Update{Kind: k, ID: e.ID, Raw: bytes.Clone(raw)})
			continue
		}
		o := changes.Observation{
			Tenant: s.tenant(), Kind: k, ResourceID: e.ID, After: bytes.Clone(raw),
			Created: before == nil, Version: version(raw), OccurredAt: time.Unix(0, e.Updated),
		}
		if e.Updated <= 0 {
			o.OccurredAt = time.Time{}
		}
		if _, err := s.Recorder.Observe(ctx, s.Sink, o); err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		return s.Model.Apply(ctx, batch)
	}
	return nil
}

// version is what identifies a record's state for its change id: its
// version, else its updated time.
func version(raw json.RawMessage) string {
	var v struct {
		Version   json.Number `json:"version"`
		UpdatedAt string      `json:"updated_at"`
	}
	_ = json.Unmarshal(raw, &v)
	if v.Version != "" {
		return v.Version.String()
	}
	return v.UpdatedAt
}

// poll reads k's records changed since the last poll, with the vendor's
// modified-since filter where it has one.
func (s *Syncer) poll(ctx context.Context, k practice.Kind, kp kindProgress) error {
	start := s.now()
	q := practice.Query{Limit: pageLimit, Filter: practice.Filter{UpdatedSince: kp.Watermark.Add(-pollOverlap)}}
	if err := s.walk(ctx, k, q, func(items []json.RawMessage) error {
		return s.keep(ctx, k, items, true)
	}); err != nil {
		return fmt.Errorf("poll %s %s: %w", s.Label, k, err)
	}
	kp.Watermark, kp.ConfirmedAt, kp.PolledAt = start, start, s.now()
	s.setKind(k, kp)
	return nil
}

// walk pages through a query of the vendor, renewing the lease between
// pages; it stops at a cursor that does not move.
func (s *Syncer) walk(ctx context.Context, k practice.Kind, q practice.Query, fn func([]json.RawMessage) error) error {
	for {
		page, err := s.Reader.List(ctx, s.tenant(), k, q)
		if err != nil {
			return err
		}
		if err := fn(page.Items); err != nil {
			return err
		}
		if !page.HasMore {
			return nil
		}
		if page.Next == "" || page.Next == q.Cursor {
			return fmt.Errorf("the adapter's next cursor does not move: %w", practice.ErrBadUpstream)
		}
		q.Cursor = page.Next
		if err := s.renew(ctx); err != nil {
			return err
		}
	}
}

// errLeaseLost ends a long step when another instance took the sync over.
var errLeaseLost = errors.New("sync lease lost to another instance")

func (s *Syncer) renew(ctx context.Context) error {
	held, err := s.Leases.Lease(ctx, s.name(), s.Holder, s.Config.LeaseTTL)
	if err != nil {
		return err
	}
	if !held {
		s.mu.Lock()
		s.holding = false
		s.mu.Unlock()
		return errLeaseLost
	}
	return nil
}

// reconcile lists every record of k and compares the whole with the
// model: what changed raises its change record, what the vendor no longer
// has is removed with one change record of its removal. A record written
// since the pass started is not judged by it.
func (s *Syncer) reconcile(ctx context.Context, k practice.Kind) error {
	start := s.now()
	seen := map[string]bool{}
	if err := s.walk(ctx, k, practice.Query{Limit: pageLimit}, func(items []json.RawMessage) error {
		for _, raw := range items {
			var v struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &v) == nil {
				seen[v.ID] = true
			}
		}
		return s.keep(ctx, k, items, true)
	}); err != nil {
		return fmt.Errorf("reconcile %s %s: %w", s.Label, k, err)
	}
	for _, id := range s.Model.idsBefore(k, start) {
		if seen[id] {
			continue
		}
		if err := s.forget(ctx, k, id, start); err != nil {
			return err
		}
	}
	s.mu.Lock()
	kp := s.kindProgress(k)
	kp.About, kp.Seen = len(seen), len(seen)
	kp.Watermark, kp.ConfirmedAt, kp.ReconciledAt, kp.PolledAt = start, start, s.now(), s.now()
	s.mu.Unlock()
	s.Logger.Info("reconciled", zap.String("sync", s.name()), zap.String("kind", string(k)), zap.Int("records", len(seen)))
	return nil
}

// forget removes a record the vendor no longer has, raising one change
// record whose after is null.
func (s *Syncer) forget(ctx context.Context, k practice.Kind, id string, at time.Time) error {
	before := s.Model.find(s.Model.kinds[k], id)
	if before == nil {
		return nil
	}
	c := practice.Change{
		ID:   changes.ChangeID(s.tenant(), k, id, "removed", before),
		Firm: s.tenant().Firm, Kind: k, ResourceID: id,
		Before: bytes.Clone(before), After: json.RawMessage("null"), OccurredAt: at,
	}
	if err := s.Sink.Publish(ctx, c); err != nil {
		return fmt.Errorf("publish removal of %s: %w", id, err)
	}
	return s.Model.Apply(ctx, []Update{{Kind: k, ID: id}})
}

// readFeed reads the vendor's change feed from where it stopped.
func (s *Syncer) readFeed(ctx context.Context) error {
	start := s.now()
	s.mu.Lock()
	cursor := s.progress.FeedCursor
	s.mu.Unlock()
	k := s.Kinds[0]
	for i := 0; ; i++ {
		if i == maxFeedPages {
			break
		}
		page, err := s.Feed.Changes(ctx, s.tenant(), cursor)
		if errors.Is(err, practice.ErrFeedExpired) {
			s.Logger.Warn("change feed expired; reconciling", zap.String("sync", s.name()), zap.Error(err))
			s.mu.Lock()
			s.progress.FeedCursor, s.progress.ReconcileFrom = "", start
			s.mu.Unlock()
			fresh, err := s.Feed.Changes(ctx, s.tenant(), "")
			if err != nil {
				return fmt.Errorf("restart %s change feed: %w", s.Label, err)
			}
			cursor = fresh.Next
			break
		}
		if err != nil {
			return fmt.Errorf("%s change feed: %w", s.Label, err)
		}
		if err := s.keep(ctx, k, page.Changed, true); err != nil {
			return err
		}
		for _, id := range page.Gone {
			if err := s.forget(ctx, k, id, start); err != nil {
				return err
			}
		}
		if page.Next == "" || page.More && page.Next == cursor {
			return fmt.Errorf("%s change feed does not move: %w", s.Label, practice.ErrBadUpstream)
		}
		cursor = page.Next
		if !page.More {
			break
		}
		if err := s.renew(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.progress.FeedCursor = cursor
	for _, k := range s.Kinds {
		kp := s.kindProgress(k)
		kp.Watermark, kp.ConfirmedAt, kp.PolledAt = start, start, s.now()
	}
	s.mu.Unlock()
	return nil
}

// record saves the checkpoint after a step and publishes the freshness.
func (s *Syncer) record(ctx context.Context, stepErr error) {
	if errors.Is(stepErr, errLeaseLost) || ctx.Err() != nil {
		return
	}
	now := s.now()
	s.mu.Lock()
	switch {
	case stepErr == nil:
		s.progress.Error, s.progress.ErrorSince = "", time.Time{}
	case s.progress.Error == "":
		s.progress.ErrorSince = now
		fallthrough
	default:
		s.progress.Error = stepErr.Error()
	}
	if s.Calls != nil {
		count := s.Calls()
		s.calls.add(now, count)
		s.progress.CallsLastHour = s.calls.sinceOldest(count)
	}
	s.progress.Holder, s.progress.SavedAt, s.progress.Costs = s.Holder, now, s.plan.snapshot()
	b, err := json.Marshal(s.progress)
	// Reads are told of the step's outcome in the same critical section
	// as Status is, so the two never disagree.
	s.publishLocked()
	s.mu.Unlock()
	if stepErr != nil {
		s.Logger.Warn("sync step failed", zap.String("sync", s.name()), zap.Error(stepErr))
	}
	if err == nil {
		err = s.Checkpoints.SaveCheckpoint(ctx, s.name(), b)
	}
	if err != nil && ctx.Err() == nil {
		s.Logger.Warn("sync checkpoint not saved", zap.String("sync", s.name()), zap.Error(err))
	}
	if stepErr != nil {
		// A failing vendor is not asked again at once.
		s.sleep(ctx, min(s.Config.Poll, 5*time.Second))
	}
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
		s.Model.SetFreshness(ks.Kind, practice.Freshness{ConfirmedAt: ks.ConfirmedAt, Backfilled: ks.Backfilled, State: st.State})
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
