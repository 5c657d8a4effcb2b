package dispatcher

import (
	"context"
	"time"

	"github.com/practicegw/practicegw/practice"
	"go.uber.org/zap"
)

// Outbox is the embedded store's queue of changes, written in the same
// transaction as the record change itself.
type Outbox interface {
	// ReadOutbox returns up to max entries with Seq > after, in Seq order.
	// Seq starts at 1 (a bbolt NextSequence), so after=0 reads from the
	// start.
	ReadOutbox(after uint64, max int) ([]practice.OutboxEntry, error)
	// DeleteOutbox removes every entry with Seq <= upTo.
	DeleteOutbox(upTo uint64) error
	// OutboxSignal receives a value after new entries are written.
	OutboxSignal() <-chan struct{}
}

// An Intake takes a batch of changes durably: once it returns nil the
// changes are safe elsewhere (ingested into the engine's store, published
// to Kafka) and may be deleted from the outbox. Any error means none of
// them may be deleted yet.
type Intake func(ctx context.Context, changes []practice.Change) error

// Publish hands one change to the intake, durably before it returns: an
// Intake is the change sink (changes.ChangeSink) the firms' systems raise
// change records into, straight to the engine or the changes topic.
func (in Intake) Publish(ctx context.Context, c practice.Change) error {
	return in(ctx, []practice.Change{c})
}

const (
	// outboxBatch bounds one read of the outbox and so one sink call. A
	// batch is whatever arrived while the last one was handed on, with no
	// linger: under load batches grow, and a change at a quiet moment
	// leaves at once (in Kafka mode the publish is the stage's one wait).
	outboxBatch = 256
	// outboxDeleteEvery spaces deletes of handed-on entries, each of which
	// is a commit of the outbox's store. Entries handed on but not deleted
	// yet are handed on again after a crash, which changes nothing.
	outboxDeleteEvery = 100 * time.Millisecond
	// outboxPoll is a safety net for a missed signal.
	outboxPoll = 5 * time.Second
	// outboxMaxBackoff caps the pause between retries of a failing sink.
	outboxMaxBackoff = 30 * time.Second
)

// DrainOutbox ingests src's entries in order until ctx is cancelled: the
// embedded mode's first stage. See DrainOutboxTo.
func (e *Engine) DrainOutbox(ctx context.Context, src Outbox) error {
	return DrainOutboxTo(ctx, src, e.IngestChanges, e.log)
}

// DrainOutboxTo hands src's entries to sink in order, in batches, until ctx
// is cancelled. Entries are deleted only after sink took them, so a crash in
// between hands them over again, which deterministic event ids make
// harmless. A failing batch is retried with backoff, never skipped, so no
// later change overtakes it.
//
// The caller owns the goroutine running it and stops it with ctx. It
// returns nil once ctx is done.
func DrainOutboxTo(ctx context.Context, src Outbox, sink Intake, log *zap.Logger) error {
	d := drain{src: src, log: log}
	defer d.deleteDone()
	var after uint64
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			if err := sleep(ctx, backoff); err != nil {
				return nil
			}
		}
		entries, err := src.ReadOutbox(after, outboxBatch)
		if err != nil {
			log.Error("reading the outbox failed", zap.Error(err))
			backoff = nextBackoff(backoff)
			continue
		}
		if len(entries) == 0 {
			backoff = 0
			d.deleteDone()
			select {
			case <-ctx.Done():
				return nil
			case <-src.OutboxSignal():
			case <-time.After(outboxPoll):
			}
			continue
		}
		changes := make([]practice.Change, len(entries))
		for i, en := range entries {
			changes[i] = en.Change
		}
		if err := sink(ctx, changes); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error("handing outbox changes on failed; retrying",
				zap.Uint64("from_seq", entries[0].Seq), zap.Int("changes", len(entries)), zap.Error(err))
			backoff = nextBackoff(backoff)
			continue
		}
		backoff = 0
		after = entries[len(entries)-1].Seq
		d.handedOn(after)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// drain deletes handed-on outbox entries now and then rather than after
// every batch.
type drain struct {
	src     Outbox
	log     *zap.Logger
	done    uint64 // handed on up to here
	deleted uint64 // deleted up to here
	last    time.Time
}

func (d *drain) handedOn(seq uint64) {
	d.done = seq
	if time.Since(d.last) >= outboxDeleteEvery {
		d.deleteDone()
	}
}

// deleteDone deletes what is handed on. If it fails the next one covers
// it: the reader has moved past those entries either way.
func (d *drain) deleteDone() {
	if d.done <= d.deleted {
		return
	}
	d.last = time.Now()
	if err := d.src.DeleteOutbox(d.done); err != nil {
		d.log.Error("deleting handed-on outbox entries failed", zap.Uint64("up_to", d.done), zap.Error(err))
		return
	}
	d.deleted = d.done
}

func nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return 100 * time.Millisecond
	}
	return min(2*d, outboxMaxBackoff)
}

// sleep waits d or until ctx is done, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Interface guard: the engine is the embedded mode's sink.
var _ Intake = (*Engine)(nil).IngestChanges
