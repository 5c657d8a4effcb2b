// Package groupcommit coalesces concurrent writes to one bbolt file into
// shared transactions: group commit. A bbolt commit costs two fsyncs
// whatever it holds, so one commit per write caps a file at a few thousand
// writes a second, and a writer that holds a lock across its commit (one
// firm's records) at one write per commit.
//
// Every writer of a file goes through one Committer: the API's record
// writes (adapters/demo) and the webhook pipeline's state (store/bolt)
// share its transactions, so that a record, its change's event and the
// event's deliveries can be one commit, and so that neither waits for
// bbolt's one writer behind the other's commits.
//
// There is no background goroutine. The first writer to wait leads: it
// commits every write queued so far in one transaction, and writes that
// arrive meanwhile queue for the next. When it is done it hands the lead to
// the oldest queued writer. Under no load a write is committed at once,
// alone; under load each commit carries everything that arrived during the
// previous one, so batches grow with the load and no timer adds latency.
//
// A write is a function of the transaction, as with bbolt's Batch: it may
// run more than once (when another write in its batch fails, the batch is
// rolled back and run again without the failing one), so it must only
// read and write through tx and reset whatever it reports before it runs.
// Each write is atomic: it sees the writes before it in the batch and is
// either committed whole or not at all.
package groupcommit

import (
	"fmt"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// Committer is the group committer of one bbolt file. It is safe for
// concurrent use.
type Committer struct {
	db *bbolt.DB

	mu      sync.Mutex
	queue   []*Write
	leading bool
}

// New returns the committer of db.
func New(db *bbolt.DB) *Committer { return &Committer{db: db} }

// DB is the file the committer writes.
func (c *Committer) DB() *bbolt.DB { return c.db }

// Write is one write submitted to a Committer.
type Write struct {
	c       *Committer
	fn      func(*bbolt.Tx) error
	settled func(error)
	err     error
	done    bool // guarded by c.mu; err is set before it
	// turn receives true when the write's goroutine is to lead the next
	// batch, false when the write is done.
	turn chan bool
}

// Update runs fn in a shared transaction and returns once that transaction
// has committed (or fn or the commit failed).
func (c *Committer) Update(fn func(*bbolt.Tx) error) error { return c.Submit(fn, nil).Wait() }

// Submit queues fn for the next commit and returns at once, so that a
// writer may release what it holds before it waits: one firm's writes are
// computed one at a time but committed together. settled, if set, is
// called once with the write's result (nil once the transaction holding fn
// has committed), by the goroutine that committed it, before the write's
// Wait returns; a batch's writes are settled in the order they were
// submitted. It is where a write makes itself visible (an index in memory)
// in commit order. It must not wait for the committer.
//
// Every Submit must be followed by Wait: the lead may be handed to it.
func (c *Committer) Submit(fn func(*bbolt.Tx) error, settled func(error)) *Write {
	w := &Write{c: c, fn: fn, settled: settled, turn: make(chan bool, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	c.mu.Unlock()
	return w
}

// UpdateLazy is Update for a write nobody is waiting on (the record of a
// webhook attempt already made): when no commit is under way it waits up to
// linger for another write to start one and joins it, rather than costing
// a commit of its own. Under load there is always a commit to join; at a
// few writes a second it halves the commits, and with them the fsyncs and
// the CPU they cost.
func (c *Committer) UpdateLazy(fn func(*bbolt.Tx) error, linger time.Duration) error {
	return c.Submit(fn, nil).wait(linger)
}

// Wait returns once w's transaction has committed, with fn's error or the
// commit's. It is not abandoned on a cancelled context: the write may be in
// the batch being committed, and its caller must learn whether it was.
func (w *Write) Wait() error { return w.wait(0) }

func (w *Write) wait(linger time.Duration) error {
	c := w.c
	c.mu.Lock()
	if w.done {
		c.mu.Unlock()
		return w.err
	}
	if !c.leading && linger > 0 {
		c.mu.Unlock()
		t := time.NewTimer(linger)
		select {
		case lead := <-w.turn:
			t.Stop()
			if !lead {
				return w.err
			}
			c.lead(w)
			return w.err
		case <-t.C:
		}
		return w.wait(0)
	}
	if c.leading {
		c.mu.Unlock()
		if !<-w.turn {
			return w.err
		}
	} else {
		c.leading = true
		c.mu.Unlock()
	}
	c.lead(w)
	return w.err
}

// lead commits everything queued, then hands the lead on, even if a
// settled hook panics: a lead never handed on would hang every writer.
func (c *Committer) lead(self *Write) {
	defer func() {
		c.mu.Lock()
		if len(c.queue) > 0 {
			next := c.queue[0]
			c.mu.Unlock()
			next.turn <- true
			return
		}
		c.leading = false
		c.mu.Unlock()
	}()
	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()
	c.commit(batch, self)
}

// commit runs batch in one transaction, retrying without any write that
// fails, and tells every write but self its result.
func (c *Committer) commit(batch []*Write, self *Write) {
	for len(batch) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bbolt.Tx) error {
			for i, w := range batch {
				if err := run(w.fn, tx); err != nil {
					failed, w.err = i, err
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			// Committed, or the commit itself failed: the same for all.
			for _, w := range batch {
				w.err = err
			}
			c.finish(batch, self)
			return
		}
		c.finish(batch[failed:failed+1], self)
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

// finish settles ws, marks them done and wakes their writers.
func (c *Committer) finish(ws []*Write, self *Write) {
	for _, w := range ws {
		if w.settled != nil {
			w.settled(w.err)
		}
	}
	c.mu.Lock()
	for _, w := range ws {
		w.done = true
	}
	c.mu.Unlock()
	for _, w := range ws {
		if w != self {
			w.turn <- false
		}
	}
}

// run calls fn, turning a panic into an error so that one bad write
// cannot leave the writers queued behind it waiting for ever.
func run(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("groupcommit: write panicked: %v", p)
		}
	}()
	return fn(tx)
}
