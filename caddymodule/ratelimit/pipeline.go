package ratelimit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/practicegw/practicegw/internal/gcra"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// scriptPipe runs the script for concurrent requests, deciding them in
// batches: one script call (go-redis, EVALSHA) decides every request that
// queued while the previous call was on the wire or since it started, up
// to maxBatch.
//
// A round trip's fixed costs (two wake-ups of Redis and of this process,
// the script's setup, Redis's clock) are most of what a decision costs, so
// a busy gateway sends bigger batches rather than more of them: whatever
// queued while one round trip was out goes in the next.
//
// With an interval set, once a round trip has carried more than one
// request (requests are arriving faster than round trips return), the
// next starts no sooner than interval after the last one started: its
// first request waits the rest of the interval, at most interval, for
// others to join it. A request that finds the last round trip carried
// only itself is sent at once, so one client making one request at a
// time never waits.
//
// Within a batch Redis decides each request as if alone, in order,
// atomically and on its own clock: batching changes how requests travel,
// not what decides them.
type scriptPipe struct {
	limits   *redisstore.RateLimits
	timeout  time.Duration
	interval time.Duration
	calls    chan *scriptCall
	free     sync.Pool // *scriptCall

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped chan struct{} // closed when run returns: callers stop waiting

	// Owned by the run goroutine.
	batch   []*scriptCall
	encoder *redisstore.RateBatch

	// batches counts script calls written and lastSize says how many
	// requests the last one carried, so tests can see requests share them.
	batches, lastSize atomic.Int64
}

const (
	// maxBatch bounds a batch, and so one script call's arguments. Past
	// it, requests wait for the next batch.
	maxBatch = 256
	// queueSize is how many calls may wait for a batch. A caller that
	// finds the queue full waits, within its timeout, as it would for a
	// slow batch.
	queueSize = 4 * maxBatch
	// maxYields bounds how often a batch lets other goroutines run first.
	maxYields = 3
)

// scriptCall is one request's run of the script. Calls are reused, and a
// call's caller and the pipeline goroutine hand it back and forth through
// channels, which orders their reads and writes of it.
type scriptCall struct {
	id      string
	cell    gcra.Cell
	consume bool
	now     int64

	// Written by the pipeline goroutine before it signals done.
	d    Decision
	err  error
	done chan struct{} // buffered: answering never waits for the caller

	// timer bounds the caller's wait; it lives with the call because a
	// context.WithTimeout per request costs several allocations and a walk
	// up the request's context chain. Since Go 1.23 a stopped timer never
	// delivers a stale tick after Reset, so a reused call starts clean.
	timer *time.Timer
	// abandoned is set by a caller that stopped waiting. A call still
	// queued is then not sent: the fallback decided and counted its
	// request, and Redis must not count it again.
	abandoned atomic.Bool
}

var (
	errTimeout = errors.New("redis did not answer within the timeout")
	errClosed  = errors.New("rate limiter closed")
)

func newScriptPipe(limits *redisstore.RateLimits, timeout, interval time.Duration) *scriptPipe {
	p := &scriptPipe{
		limits:   limits,
		encoder:  redisstore.NewRateBatch(),
		timeout:  timeout,
		interval: interval,
		calls:    make(chan *scriptCall, queueSize),
		batch:    make([]*scriptCall, 0, maxBatch),
		stopped:  make(chan struct{}),
	}
	p.free.New = func() any {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return &scriptCall{done: make(chan struct{}, 1), timer: t}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go p.run(ctx)
	return p
}

// close stops the pipeline goroutine, after the batch in flight. Calls not
// yet answered, and any made later, get errClosed at once.
func (p *scriptPipe) close() {
	p.cancel()
	p.wg.Wait()
}

// do runs the script for one request and waits for its answer until the
// pipeline's timeout passes or ctx ends, whichever comes first. now is
// zero outside tests, so that Redis's clock decides.
func (p *scriptPipe) do(ctx context.Context, id string, c gcra.Cell, consume bool, now int64) (Decision, error) {
	call := p.free.Get().(*scriptCall)
	call.id, call.cell, call.consume, call.now = id, c, consume, now
	call.timer.Reset(p.timeout)
	select {
	case p.calls <- call:
	default:
		if err := p.enqueue(ctx, call); err != nil {
			return Decision{}, err
		}
	}
	select {
	case <-call.done:
		call.timer.Stop()
		d, err := call.d, call.err
		call.id, call.err = "", nil
		p.free.Put(call)
		return d, err
	case <-call.timer.C:
		// Not reused: the pipeline goroutine may still answer it.
		call.abandoned.Store(true)
		return Decision{}, errTimeout
	case <-ctx.Done():
		call.timer.Stop()
		call.abandoned.Store(true)
		return Decision{}, ctx.Err()
	case <-p.stopped:
		call.timer.Stop()
		call.abandoned.Store(true)
		return Decision{}, errClosed
	}
}

// enqueue waits for room in the queue, which is full only when Redis is
// falling behind, within the call's timeout.
func (p *scriptPipe) enqueue(ctx context.Context, call *scriptCall) error {
	select {
	case p.calls <- call:
		return nil
	case <-call.timer.C:
		return errTimeout
	case <-ctx.Done():
		call.timer.Stop()
		return ctx.Err()
	case <-p.stopped:
		call.timer.Stop()
		return errClosed
	}
}

func (p *scriptPipe) run(ctx context.Context) {
	defer p.wg.Done()
	defer close(p.stopped)
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	var (
		last     time.Time // when the last round trip started
		lastSize int       // and how many requests it carried
	)
	for {
		batch := p.batch[:0]
		select {
		case <-ctx.Done():
			return
		case c := <-p.calls:
			batch = append(batch, c)
		}
		// Wait out the interval without listening to p.calls: requests
		// that arrive meanwhile queue in its buffer rather than each
		// waking this goroutine.
		if rest := p.interval - time.Since(last); lastSize > 1 && rest > 0 {
			wait.Reset(rest)
			select {
			case <-wait.C:
			case <-ctx.Done():
				wait.Stop()
				answerAll(batch, errClosed)
				return
			}
		}
		batch = p.gather(batch)
		last, lastSize = time.Now(), len(batch)
		p.lastSize.Store(int64(lastSize))
		p.flush(ctx, batch)
		clear(batch) // let answered calls' ids go
	}
}

// gather adds the calls that are queued to batch. Before it stops, it lets
// the goroutines that are ready to run go first, up to maxYields times
// while each time brings more calls: on a busy gateway they are requests on
// their way here, and a bigger batch saves a round trip (bench/ratelimit.sh
// measured a quarter less of Redis's CPU a request); on a quiet one
// nothing else is ready and runtime.Gosched returns at once.
func (p *scriptPipe) gather(batch []*scriptCall) []*scriptCall {
	for yields := 0; ; yields++ {
		n := len(batch)
	drain:
		for len(batch) < maxBatch {
			select {
			case c := <-p.calls:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		if len(batch) == maxBatch || yields == maxYields || yields > 0 && len(batch) == n {
			return batch
		}
		runtime.Gosched()
	}
}

// flush decides a batch and answers each of its calls, within one
// timeout: no caller in the batch waits longer than that anyway.
func (p *scriptPipe) flush(ctx context.Context, batch []*scriptCall) {
	live := batch[:0]
	for _, c := range batch {
		if !c.abandoned.Load() {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	p.encoder.Reset()
	for _, c := range live {
		p.encoder.Add(c.id, c.cell, c.consume, c.now)
	}
	p.batches.Add(1)
	results, err := p.limits.Decide(ctx, p.encoder)
	if err != nil {
		answerAll(live, err)
		return
	}
	for i, c := range live {
		answer(c, decision(results[i]), nil)
	}
}

// answer hands c its outcome. The pipeline goroutine must not touch c
// afterwards: its caller may already be reusing it.
func answer(c *scriptCall, d Decision, err error) {
	c.d, c.err = d, err
	c.done <- struct{}{}
}

func answerAll(calls []*scriptCall, err error) {
	for _, c := range calls {
		answer(c, Decision{}, err)
	}
}
