package bolt

import (
	"fmt"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// committer coalesces concurrent writes into shared bbolt transactions:
// group commit. A bbolt commit costs two fsyncs whatever it holds, so one
// commit per write caps the store at a few thousand writes a second, and
// one per delivery (claim, attempt) capped delivery at a few hundred.
//
// There is no background goroutine. The first writer to arrive leads: it
// commits every write queued so far in one transaction, and writes that
// arrive meanwhile queue for the next. When it is done it hands the lead to
// the oldest queued writer. Under no load a write is committed at once,
// alone; under load each commit carries everything that arrived during the
// previous one, so batches grow with the load.
//
// Sustained, commits start no more often than one per commitGap. bbolt has
// one writer, and in the embedded gateway the API's own writes (a commit
// each) queue behind ours: committing every attempt as soon as it is
// recorded took that writer from them hundreds of times a second for a
// write or two each. Spaced, each commit carries more and the API waits
// behind fewer. A short burst (one change's record, queue, claim and
// attempt, one after another) is not held: the pacing is a token bucket.
//
// A write is a function of the transaction, as with bbolt's Batch: it may
// run more than once (when another write in its batch fails, the batch is
// rolled back and run again without the failing one), so it must only
// read and write through tx and reset whatever it reports before it runs.
// Each write is atomic: it sees the writes before it in the batch and is
// either committed whole or not at all.
type committer struct {
	db *bbolt.DB

	mu      sync.Mutex
	queue   []*write
	leading bool

	// The pacing bucket, guarded by the lead.
	tokens   float64
	refilled time.Time
}

// Pacing: commitBurst commits may start back to back, and then one per
// commitGap. Measured with the pipeline benchmark at 1,000 API writes a
// second: at one commit per 2ms the API's writes fell behind; at one per
// 4ms they keep up, and delivery still sustains several thousand a second
// (claims are prefetched, and a request slot is not held while its attempt
// is recorded).
const (
	commitGap   = 4 * time.Millisecond
	commitBurst = 4
)

// pace waits, if need be, for the bucket to allow a commit, and takes it.
func (c *committer) pace() {
	now := time.Now()
	if c.refilled.IsZero() {
		c.tokens = commitBurst
	} else {
		c.tokens = min(commitBurst, c.tokens+float64(now.Sub(c.refilled))/float64(commitGap))
	}
	c.refilled = now
	if c.tokens < 1 {
		time.Sleep(time.Duration((1 - c.tokens) * float64(commitGap)))
		c.tokens, c.refilled = 1, time.Now()
	}
	c.tokens--
}

type write struct {
	fn  func(*bbolt.Tx) error
	err error
	// turn receives true when the write's goroutine is to lead the next
	// batch, false when the write is done (err is set).
	turn chan bool
}

func (c *committer) update(fn func(*bbolt.Tx) error) error {
	w := &write{fn: fn, turn: make(chan bool, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	// Waiting is not abandoned on a cancelled context: the write may be in
	// the batch being committed, and its caller must learn whether it was.
	if !lead && !<-w.turn {
		return w.err
	}

	c.pace()
	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()
	c.commit(batch, w)

	c.mu.Lock()
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.mu.Unlock()
		next.turn <- true
	} else {
		c.leading = false
		c.mu.Unlock()
	}
	return w.err
}

// commit runs batch in one transaction, retrying without any write that
// fails, and tells every write but self its result.
func (c *committer) commit(batch []*write, self *write) {
	done := func(w *write) {
		if w != self {
			w.turn <- false
		}
	}
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
				done(w)
			}
			return
		}
		done(batch[failed])
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

// run calls fn, turning a panic into an error so that one bad write
// cannot leave the writers queued behind it waiting for ever.
func run(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("boltstore: write panicked: %v", p)
		}
	}()
	return fn(tx)
}
