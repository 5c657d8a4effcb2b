// Package dispatcher turns change records into events and events into
// signed, retried, logged webhook deliveries.
//
// The pipeline has three stages, each durable before the next begins:
//
//  1. Ingest derives events from a change (Derive), records each once, and
//     fans each out to one delivery per subscribed endpoint (IngestEvents).
//     The Kafka consumer (package kafka) commits a change's offset after
//     IngestEvents returns; the embedded outbox drainer deletes the outbox
//     entry after it returns.
//  2. Run's delivery loop claims due deliveries under a lease, signs and
//     posts them with per-endpoint concurrency limits and circuit breakers,
//     and records each attempt with the delivery's new state atomically.
//  3. Replay and ReplayFailed make attempts outside the schedule.
//
// Event and delivery ids are deterministic, so doing any stage twice (a
// crash between a write and its acknowledgement) changes nothing.
//
// The engine owns no storage: it depends on the small interfaces in
// store.go, which store/bolt implements for the embedded mode and
// store/redis for dispatchers sharing the work.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Config tunes the engine. Zero values take the defaults given.
type Config struct {
	// BackoffBase is the delay before the first retry. Default 30s.
	BackoffBase time.Duration
	// BackoffFactor multiplies each later delay. Default 6.
	BackoffFactor float64
	// Timeout bounds one attempt, connect to response. Default 15s.
	Timeout time.Duration
	// AllowCIDRs are exempt from the private-address block.
	AllowCIDRs []netip.Prefix
	// MaxInFlightPerEndpoint bounds concurrent requests to one endpoint
	// from this engine, so a slow endpoint only ever occupies its own
	// slots. A slot is held for the HTTP request only, not while the
	// attempt is recorded. Default 32: at 100 ms per request an endpoint
	// still takes 320 events a second from each dispatcher.
	MaxInFlightPerEndpoint int
	// MaxInFlightPerFirm bounds concurrent requests to all of one firm's
	// endpoints from this engine, so one firm's credentials can neither
	// aim a flood of signed requests at one host through many endpoints
	// nor take every worker from other firms. Its further due deliveries
	// wait, unclaimed, until a request of the firm is answered. Default 64.
	MaxInFlightPerFirm int
	// Workers bounds concurrent attempts overall. Default 256.
	Workers int
	// BreakerFailures is how many consecutive unhealthy attempts (no
	// answer, 5xx, 429) open an endpoint's circuit breaker. Default 5.
	BreakerFailures int
	// BreakerCooldown is how long an open breaker defers the endpoint's
	// deliveries before one probe attempt. Default 1m.
	BreakerCooldown time.Duration
	// ShutdownGrace is how long Close lets in-flight attempts finish before
	// aborting them and handing their deliveries back. Default 5s.
	ShutdownGrace time.Duration
	// LeaseDuration is how long a claimed delivery stays with this engine
	// before any other may claim it: it must outlast an attempt and its
	// recording, and it is how long a crashed dispatcher's claims wait.
	// Default Timeout + 30s.
	LeaseDuration time.Duration
	// PollInterval bounds how long the delivery loop sleeps when nothing
	// wakes it. Work this engine queues wakes it at once; work another
	// process queues (dispatchers sharing Redis) waits for this. Default
	// 30s.
	PollInterval time.Duration
	// Retention is how long events and finished deliveries are kept
	// (Prune); negative keeps them for ever. Default DefaultRetention, 30
	// days.
	Retention time.Duration
	// PruneInterval is how often Run prunes the webhook log; the first
	// pass comes 30s after Run starts, or sooner if this is shorter.
	// Default 1h.
	PruneInterval time.Duration
	// MaxEndpoints is how many webhook endpoints one firm may register in
	// each mode (live, sandbox), so that one firm's credentials cannot
	// multiply the signed requests every change sends. Default 50.
	MaxEndpoints int
	// BulkReplaysPerMinute bounds how often one firm may replay an
	// endpoint's failed deliveries in bulk. Default 10.
	BulkReplaysPerMinute int
	// ReplayBudget counts each firm's bulk replays; give the Redis one
	// when several gateways serve the API. Default: in this process.
	ReplayBudget ReplayBudget
	// Registerer receives the engine's Prometheus metrics. Default
	// prometheus.DefaultRegisterer; collectors registered already (a
	// second engine, a config reload) are reused.
	Registerer prometheus.Registerer
	// Clock is the time source for schedules, leases and signatures.
	// Default time.Now.
	Clock func() time.Time
	// Logger receives operational logs. Default: none.
	Logger *zap.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffFactor == 0 {
		c.BackoffFactor = DefaultBackoffFactor
	}
	if c.Timeout == 0 {
		c.Timeout = 15 * time.Second
	}
	if c.MaxInFlightPerEndpoint == 0 {
		c.MaxInFlightPerEndpoint = 32
	}
	if c.MaxInFlightPerFirm == 0 {
		c.MaxInFlightPerFirm = 64
	}
	if c.Workers == 0 {
		c.Workers = 256
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = 5
	}
	if c.BreakerCooldown == 0 {
		c.BreakerCooldown = time.Minute
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = c.Timeout + 30*time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = 30 * time.Second
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = time.Hour
	}
	if c.MaxEndpoints == 0 {
		c.MaxEndpoints = defaultMaxEndpoints
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.DefaultRegisterer
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.BulkReplaysPerMinute == 0 {
		c.BulkReplaysPerMinute = 10
	}
	if c.ReplayBudget == nil {
		c.ReplayBudget = &localBudget{now: c.Clock, tats: map[string]int64{}}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	switch {
	case c.BackoffBase < 0:
		return c, fmt.Errorf("backoff base %s is negative", c.BackoffBase)
	case c.BackoffFactor < 1:
		return c, fmt.Errorf("backoff factor %g is below 1: retries would come sooner each time", c.BackoffFactor)
	case c.Timeout < 0, c.BreakerCooldown < 0, c.ShutdownGrace < 0, c.PollInterval < 0, c.PruneInterval < 0:
		return c, errors.New("timeouts must not be negative")
	case c.LeaseDuration <= c.Timeout:
		return c, fmt.Errorf("lease duration %s must exceed the attempt timeout %s", c.LeaseDuration, c.Timeout)
	case c.MaxInFlightPerEndpoint < 0, c.MaxInFlightPerFirm < 0, c.Workers < 0, c.BreakerFailures < 0, c.BulkReplaysPerMinute < 0:
		return c, errors.New("limits must not be negative")
	}
	return c, nil
}

// Engine runs the webhook pipeline over its backends.
type Engine struct {
	cfg      Config
	b        Backends
	log      *zap.Logger
	policy   *AddressPolicy
	sender   *sender
	schedule Schedule
	leaseFor time.Duration
	wakeC    chan struct{}
	// recorded fires when this engine records a new event (Recorded).
	recorded signal
	metrics  *metrics
	epCache  endpointCache
	// events are the events recorded last, for their first attempts.
	events recentEvents

	// createMu makes counting a tenant's endpoints and adding one a
	// single step in this process. Gateways sharing Redis each check
	// too, so concurrent registrations through several of them can pass
	// the ceiling by at most one each.
	createMu sync.Mutex

	mu        sync.Mutex
	inflight  int // attempts running
	readyN    int // claims waiting for a slot, over every endpoint
	endpoints map[string]*endpointState
	firms     map[string]*firmLoad // firms with attempts running or waiting
	// delivering says the delivery loop runs and takes handoffs; handed
	// are the claims handed to it, their slots taken (handoff.go).
	delivering bool
	handed     []Claim

	runMu   sync.Mutex
	stop    context.CancelFunc
	done    chan struct{}
	running bool
	closed  bool
}

// New builds an engine. Every backend but Pruner must be set.
func New(cfg Config, b Backends) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("dispatcher config: %w", err)
	}
	if b.Events == nil || b.Endpoints == nil || b.Catalog == nil || b.Queue == nil || b.Attempts == nil || b.Deliveries == nil {
		return nil, errors.New("dispatcher: every backend must be set")
	}
	policy := NewAddressPolicy(cfg.AllowCIDRs)
	return &Engine{
		cfg:      cfg,
		b:        b,
		log:      cfg.Logger,
		policy:   policy,
		sender:   newSender(policy, cfg.Timeout, cfg.MaxInFlightPerEndpoint),
		schedule: Schedule{Base: cfg.BackoffBase, Factor: cfg.BackoffFactor},
		// A lease outlives the slowest attempt and its bookkeeping, so only
		// a dispatcher that died loses one.
		leaseFor:  cfg.LeaseDuration,
		wakeC:     make(chan struct{}, 1),
		metrics:   newMetrics(cfg.Registerer),
		endpoints: make(map[string]*endpointState),
		firms:     make(map[string]*firmLoad),
	}, nil
}

func (e *Engine) now() time.Time { return e.cfg.Clock() }

// wake nudges the delivery loop; a wake already pending is enough.
func (e *Engine) wake() {
	select {
	case e.wakeC <- struct{}{}:
	default:
	}
}

// ErrClosed is what Run returns for an engine already closed, which a
// caller that closes before its loop started can expect.
var ErrClosed = errors.New("dispatcher: engine is closed")

// Run delivers webhooks, and prunes the webhook log beside, until ctx is
// cancelled or Close is called. On the
// way out it lets in-flight attempts finish for up to ShutdownGrace, then
// aborts the rest and hands their deliveries back.
func (e *Engine) Run(ctx context.Context) error {
	e.runMu.Lock()
	if e.closed {
		e.runMu.Unlock()
		return ErrClosed
	}
	if e.running {
		e.runMu.Unlock()
		return errors.New("dispatcher: already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	e.running, e.stop, e.done = true, cancel, done
	e.runMu.Unlock()

	defer func() {
		cancel()
		e.runMu.Lock()
		e.running, e.stop, e.done = false, nil, nil
		e.runMu.Unlock()
		close(done)
	}()
	var background sync.WaitGroup
	background.Add(2)
	go func() {
		defer background.Done()
		e.sampleBacklog(ctx)
	}()
	go func() {
		defer background.Done()
		e.retain(ctx)
	}()
	e.loop(ctx)
	cancel()
	background.Wait()
	return nil
}

// Close stops Run, waits for it to return and releases idle connections.
func (e *Engine) Close() error {
	e.runMu.Lock()
	e.closed = true
	stop, done := e.stop, e.done
	e.runMu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	e.sender.close()
	return nil
}
