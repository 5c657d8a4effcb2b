package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/practicegw/practicegw/adapters"
	"go.uber.org/zap"
)

// Outbox is the embedded store's queue of changes, written in the same
// transaction as the record change itself.
type Outbox interface {
	// ReadOutbox returns up to max entries with Seq > after, in Seq order.
	// Seq starts at 1 (a bbolt NextSequence), so after=0 reads from the
	// start.
	ReadOutbox(after uint64, max int) ([]adapters.OutboxEntry, error)
	// DeleteOutbox removes every entry with Seq <= upTo.
	DeleteOutbox(upTo uint64) error
	// OutboxSignal receives a value after new entries are written.
	OutboxSignal() <-chan struct{}
}

const (
	outboxBatch = 100
	// outboxPoll is a safety net for a missed signal.
	outboxPoll = 5 * time.Second
	// outboxMaxBackoff caps the pause between retries of a failing Ingest.
	outboxMaxBackoff = 30 * time.Second
)

// DrainOutbox ingests src's entries in order until ctx is cancelled. An
// entry is deleted only after Ingest succeeded, so a crash in between
// ingests it again, which deterministic ids make harmless. A failing entry
// is retried, never skipped, so no later change overtakes it; only an
// ErrInvalidChange, which can never succeed, is logged and dropped.
//
// The caller owns the goroutine running it and stops it with ctx; Close
// does not. It returns nil once ctx is done.
func (e *Engine) DrainOutbox(ctx context.Context, src Outbox) error {
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
			e.log.Error("reading the outbox failed", zap.Error(err))
			backoff = nextBackoff(backoff)
			continue
		}
		if len(entries) == 0 {
			backoff = 0
			select {
			case <-ctx.Done():
				return nil
			case <-src.OutboxSignal():
			case <-time.After(outboxPoll):
			}
			continue
		}
		done, failed := e.ingestEntries(ctx, entries, after)
		if done > after {
			// Advance even if deleting fails: the entries are ingested, and
			// the next successful delete covers them.
			if err := src.DeleteOutbox(done); err != nil {
				e.log.Error("deleting ingested outbox entries failed", zap.Uint64("up_to", done), zap.Error(err))
			}
			after = done
		}
		if ctx.Err() != nil {
			return nil
		}
		if failed {
			backoff = nextBackoff(backoff)
		} else {
			backoff = 0
		}
	}
}

// ingestEntries ingests entries in order and returns the Seq of the last
// one done; failed reports that it stopped at an entry worth retrying.
func (e *Engine) ingestEntries(ctx context.Context, entries []adapters.OutboxEntry, after uint64) (done uint64, failed bool) {
	done = after
	for _, en := range entries {
		err := e.Ingest(ctx, en.Change)
		switch {
		case err == nil:
		case errors.Is(err, ErrInvalidChange):
			e.log.Error("dropping a change that cannot become events",
				zap.Uint64("seq", en.Seq), zap.String("change_id", en.Change.ID), zap.Error(err))
		default:
			if ctx.Err() == nil {
				e.log.Error("ingesting a change failed; retrying",
					zap.Uint64("seq", en.Seq), zap.String("change_id", en.Change.ID), zap.Error(err))
			}
			return done, true
		}
		done = en.Seq
	}
	return done, false
}

func nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return 100 * time.Millisecond
	}
	return min(2*d, outboxMaxBackoff)
}

// sleep waits d or until ctx is done, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
