package demo

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/practice"
)

// defaultOutboxRead bounds ReadOutbox when the caller sets no maximum.
const defaultOutboxRead = 100

// OutboxEntry is one change waiting in the outbox, with its position.
type OutboxEntry = practice.OutboxEntry

// ReadOutbox returns up to max changes after sequence number after, oldest
// first. The outbox holds every firm's changes; a drainer remembers the last
// Seq it made durable and deletes up to it.
func (r *Records) ReadOutbox(after uint64, max int) ([]OutboxEntry, error) {
	if max <= 0 {
		max = defaultOutboxRead
	}
	if after == math.MaxUint64 {
		return nil, nil
	}
	var out []OutboxEntry
	err := r.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(outboxBucket))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil && len(out) < max; k, v = c.Next() {
			e := OutboxEntry{Seq: binary.BigEndian.Uint64(k)}
			if err := json.Unmarshal(v, &e.Change); err != nil {
				return fmt.Errorf("entry %d: %w", e.Seq, err)
			}
			// A created record has no before; give it back as it was written.
			if string(e.Change.Before) == "null" {
				e.Change.Before = nil
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("demo: read outbox: %w", err)
	}
	return out, nil
}

// DeleteOutbox removes the changes up to and including sequence upTo, once
// the drainer has made them durable elsewhere.
func (r *Records) DeleteOutbox(upTo uint64) error {
	err := r.c.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(outboxBucket))
		if b == nil {
			return nil
		}
		// Collect first: deleting under a moving cursor can skip keys.
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= upTo; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demo: delete outbox up to %d: %w", upTo, err)
	}
	return nil
}

// OutboxSignal receives after a write commits, so a drainer can wait on it
// instead of polling. Signals coalesce: one receive may stand for several
// writes, so the drainer reads until the outbox is empty.
func (r *Records) OutboxSignal() <-chan struct{} {
	return r.signal
}

// ChangeLog is where writes' change records go, inside the transaction
// that stores the records, so that a change is durable with its record or
// not at all (a transactional outbox). Log is called once per write, in
// the writer's goroutine and outside any transaction, for the work that
// needs no store (deriving and encoding events), so that it runs beside
// other writes rather than inside the one transaction they share. What it
// returns runs in that transaction: perhaps more than once, each time in a
// new transaction (a group commit retries a batch without a write that
// failed), undoing what an earlier run reported; what its last successful
// run returns is called once with whether the write committed, in commit
// order.
type ChangeLog interface {
	Log(changes []practice.Change) (inTx func(tx *bbolt.Tx) (settled func(committed bool), err error), err error)
}

type logHolder struct{ log ChangeLog }

// SetChangeLog sends the changes of writes from now on to log rather than
// to the outbox (the embedded pipeline's first stage takes them in the
// writing transaction itself). restore sends them back to the outbox,
// unless another log was set since: a configuration reload sets the new
// pipeline's before the old one restores.
func (r *Records) SetChangeLog(log ChangeLog) (restore func()) {
	h := &logHolder{log: log}
	r.log.Store(h)
	return func() { r.log.CompareAndSwap(h, nil) }
}

func (r *Records) changeLog() ChangeLog {
	if h := r.log.Load(); h != nil {
		return h.log
	}
	return outboxLog{r}
}

// outboxLog appends changes to the outbox, for DrainOutbox.
type outboxLog struct{ r *Records }

func (l outboxLog) Log(changes []practice.Change) (func(*bbolt.Tx) (func(bool), error), error) {
	raws := make([][]byte, len(changes))
	for i, c := range changes {
		raw, err := practice.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode change: %w", err)
		}
		raws[i] = raw
	}
	return func(tx *bbolt.Tx) (func(bool), error) {
		ob := tx.Bucket([]byte(outboxBucket))
		if ob == nil {
			return nil, errors.New("the outbox bucket is missing")
		}
		for _, raw := range raws {
			seq, err := ob.NextSequence()
			if err != nil {
				return nil, fmt.Errorf("outbox sequence: %w", err)
			}
			if err := ob.Put(seqKey(seq), raw); err != nil {
				return nil, fmt.Errorf("append to outbox: %w", err)
			}
		}
		return l.r.signalOutbox, nil
	}, nil
}

// signalOutbox wakes the drainer for a committed write.
func (r *Records) signalOutbox(committed bool) {
	if !committed {
		return
	}
	select {
	case r.signal <- struct{}{}:
	default:
	}
}
