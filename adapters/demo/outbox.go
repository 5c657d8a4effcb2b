package demo

import (
	"encoding/binary"
	"encoding/json"
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
	err := r.db.Update(func(tx *bbolt.Tx) error {
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
