package readmodel

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// What a vendor's notification asks of the sync. A vendor that notifies
// (a webhook naming records, a document store's push saying its change
// feed has news) is read as soon as the sync holding the system is woken,
// beside its steps and whatever they are doing (a reconciliation of a
// large firm takes minutes); polls stay the safety net, finding what a
// lost notification or subscription missed.

// Notified is an adapter whose vendor's notifications are kept for the
// sync to read (adapters/kit/notifications): what a delivery could not
// read in its time is read by the sync's holder, woken.
type Notified interface {
	// ReadNotified reads what the kept notifications name that is due,
	// recording each change; more says some are left.
	ReadNotified(ctx context.Context) (more bool, err error)
}

// Notifier is an adapter that says which kinds its vendor notifies of
// (its webhooks are configured, its subscriptions live): the status
// says how each kind's changes reach the gateway.
type Notifier interface {
	Notifies(k practice.Kind) bool
}

// Subscriber is an adapter whose vendor notifies only while a
// subscription it made lives (Microsoft Graph's subscriptions, Google
// Drive's push channels): the sync's holder keeps it subscribed.
type Subscriber interface {
	// Subscribe makes the subscription, or renews it, and answers when
	// it must be renewed next. A subscription the vendor dropped is made
	// again. Zero means the adapter cannot subscribe (no address to
	// notify): it is asked again after an hour.
	Subscribe(ctx context.Context) (renewBy time.Time, err error)
}

// wokenWidth is how many records a read a notification asked for
// compares at once: their change records and states share the stores'
// commits, where one by one each waits for its own, and the more at once,
// the fewer commits a burst waits for (a bbolt commit's fsyncs cost the
// same whatever it holds). It costs no vendor call: a document store's
// change feed names what changed in its answer.
const wokenWidth = 32

// notifiedEvery is how often the holder looks for kept notifications
// without being woken: a wake lost between instances, an item whose read
// failed and is due again.
const notifiedEvery = 5 * time.Second

// Wake tells the sync that its vendor notified: the holder reads what
// was kept, or its change feed, at once. Wakes while it reads are one
// more read after.
func (s *Syncer) Wake() {
	now := s.now()
	s.mu.Lock()
	if s.wokenAt.IsZero() {
		s.wokenAt = now
	}
	s.mu.Unlock()
	select {
	case s.bell <- struct{}{}:
	default:
	}
}

// serveWakes reads what notifications ask for while this instance holds
// the lease, until ctx ends.
func (s *Syncer) serveWakes(ctx context.Context) {
	t := time.NewTicker(notifiedEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.bell:
		case <-t.C:
		}
		s.mu.Lock()
		held := s.holding
		s.mu.Unlock()
		if held {
			s.readWoken(ctx)
		}
	}
}

// TickWoken is one round of serveWakes, for a simulation: what the
// notifications kept ask for, and the change feed when woken.
func (s *Syncer) TickWoken(ctx context.Context) {
	s.mu.Lock()
	held := s.holding
	s.mu.Unlock()
	if held {
		s.readWoken(ctx)
	}
}

// readWoken keeps the vendor's subscription alive, reads the
// notifications kept, and the vendor's change feed when a notification
// said it has news.
func (s *Syncer) readWoken(ctx context.Context) {
	s.subscribe(ctx)
	s.mu.Lock()
	woken := s.wokenAt
	s.wokenAt = time.Time{}
	s.mu.Unlock()
	if n, ok := s.sys.Reader.(Notified); ok {
		// Its notifications name the records: what they leave is read,
		// and its change feed (QuickBooks' change data capture) waits for
		// its polls.
		woken = time.Time{}
		for i := 0; i < 100 && ctx.Err() == nil; i++ {
			more, err := n.ReadNotified(ctx)
			if err != nil {
				s.logger.Warn("notified records not read; tried again", zap.String("sync", s.name()), zap.Error(err))
			}
			if !more || err != nil {
				break
			}
		}
	}
	if s.vendorFeed == nil || woken.IsZero() {
		return
	}
	s.mu.Lock()
	started := true
	for _, k := range s.sys.Kinds {
		started = started && s.kindProgress(k).Backfilled
	}
	s.mu.Unlock()
	if !started {
		return // the backfill reads the feed when it ends
	}
	counted := &countingSink{ChangeSink: s.sink}
	if err := s.readFeedTo(ctx, counted, wokenWidth); err != nil {
		s.logger.Warn("change feed not read when notified; the next poll reads it", zap.String("sync", s.name()), zap.Error(err))
		return
	}
	if s.latency != nil {
		at := s.now()
		for range counted.published() {
			s.latency.Add(at.Sub(woken), at)
		}
	}
}

// subscribe asks a Subscriber adapter to make or renew its subscription
// (cheap when nothing is due: the adapter keeps what it made), and keeps
// the answer for the status.
func (s *Syncer) subscribe(ctx context.Context) {
	sub, ok := s.sys.Reader.(Subscriber)
	if !ok {
		return
	}
	// A subscription is due well before it lapses: it gives way too.
	until, err := sub.Subscribe(practice.GivingWay(ctx))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress.SubscribedUntil, s.progress.SubscribeError = until, ""
	if err != nil {
		s.progress.SubscribeError = err.Error()
		s.logger.Warn("vendor subscription not made; the polls find the changes meanwhile", zap.String("sync", s.name()), zap.Error(err))
	}
}

// countingSink counts the change records published through it.
type countingSink struct {
	changes.ChangeSink
	mu sync.Mutex
	n  int
}

func (c *countingSink) Publish(ctx context.Context, ch practice.Change) error {
	if err := c.ChangeSink.Publish(ctx, ch); err != nil {
		return err
	}
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

func (c *countingSink) published() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Wakes rings firm systems' syncs wherever they run: the syncs of this
// process at once, and, through the shared channel (Redis), those of
// every other instance, since the one that holds a sync's lease is not
// the one the vendor's notification reached.
type Wakes struct {
	shared WakeChannel
	mu     sync.Mutex
	syncs  map[string][]*Syncer
}

// WakeChannel tells every instance a sync's name (store/redis: publish
// and subscribe); each instance's Wakes.Here rings its own.
type WakeChannel interface {
	PublishWake(ctx context.Context, name string) error
}

// NewWakes makes the wakes of one process; shared is nil for a process
// alone.
func NewWakes(shared WakeChannel) *Wakes {
	return &Wakes{shared: shared, syncs: map[string][]*Syncer{}}
}

// Ring wakes the sync of firm's system in role, wherever it runs.
func (w *Wakes) Ring(ctx context.Context, firm, role string) error {
	name := syncName(firm, role)
	w.Here(name)
	if w.shared == nil {
		return nil
	}
	return w.shared.PublishWake(ctx, name)
}

// Here wakes this process's syncs of name.
func (w *Wakes) Here(name string) {
	w.mu.Lock()
	syncs := slices.Clone(w.syncs[name])
	w.mu.Unlock()
	for _, s := range syncs {
		s.Wake()
	}
}

// Add rings s when its name is rung, until the returned func is called.
func (w *Wakes) Add(s *Syncer) (remove func()) {
	name := s.name()
	w.mu.Lock()
	w.syncs[name] = append(w.syncs[name], s)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.syncs[name] = slices.DeleteFunc(w.syncs[name], func(o *Syncer) bool { return o == s })
		if len(w.syncs[name]) == 0 {
			delete(w.syncs, name)
		}
	}
}

// Latency keeps, for the last hour, how long a vendor's notification
// took to become a change record: the status's p50 and p99.
type Latency struct {
	mu      sync.Mutex
	samples []latencySample
}

type latencySample struct {
	at time.Time
	d  time.Duration
}

// latencyKept bounds the samples kept: enough for the percentiles of a
// busy hour.
const latencyKept = 20000

// Add keeps one notification's latency d, of a change recorded at at.
func (l *Latency) Add(d time.Duration, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, latencySample{at, max(d, 0)})
	if len(l.samples) > latencyKept {
		l.samples = slices.Delete(l.samples, 0, len(l.samples)-latencyKept)
	}
}

// LatencySummary is the last hour's latencies from notification to change
// record.
type LatencySummary struct {
	Count    int
	P50, P99 time.Duration
}

// Summary is the hour before now.
func (l *Latency) Summary(now time.Time) LatencySummary {
	if l == nil {
		return LatencySummary{}
	}
	l.mu.Lock()
	var ds []time.Duration
	for _, s := range l.samples {
		if now.Sub(s.at) <= time.Hour {
			ds = append(ds, s.d)
		}
	}
	l.mu.Unlock()
	if len(ds) == 0 {
		return LatencySummary{}
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return LatencySummary{Count: len(ds), P50: q(0.5), P99: q(0.99)}
}

// WithLatency keeps the latencies of the system's notifications in l,
// shown in the status: the feed's reads the sync makes when woken, and
// what the adapter's own notification reads tell l.
func WithLatency(l *Latency) SyncOption { return func(s *Syncer) { s.latency = l } }
