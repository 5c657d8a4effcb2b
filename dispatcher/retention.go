package dispatcher

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// DefaultRetention is how long the webhook log keeps events and finished
// deliveries. It is far beyond the retry schedule (about 13 hours) and
// beyond the retention a Kafka changes topic usually has; the store's
// horizon (Pruner) makes a change read again after its event was pruned
// raise nothing rather than a second delivery.
const DefaultRetention = 30 * 24 * time.Hour

const (
	// pruneBatch bounds the records one pruning step looks at: one bbolt
	// transaction or Redis script of a few milliseconds.
	pruneBatch = 500
	// pruneStart is how long after Run starts the first pass waits, so
	// that start-up is not slowed by it.
	pruneStart = 30 * time.Second
)

// Prune removes, batch after batch, the events and finished deliveries
// older than the retention period, and returns what it removed. Run calls
// it every PruneInterval; any number of engines sharing a store may run it
// at once. It does nothing if retention is off or the store cannot prune.
func (e *Engine) Prune(ctx context.Context) (PruneResult, error) {
	var total PruneResult
	if e.b.Pruner == nil || e.cfg.Retention < 0 {
		return total, nil
	}
	r := PruneRequest{Before: e.now().Add(-e.cfg.Retention), Max: pruneBatch}
	for {
		res, err := e.b.Pruner.Prune(ctx, r)
		total.Events += res.Events
		total.Deliveries += res.Deliveries
		e.metrics.pruned.WithLabelValues("event").Add(float64(res.Events))
		e.metrics.pruned.WithLabelValues("delivery").Add(float64(res.Deliveries))
		if err != nil {
			return total, fmt.Errorf("prune webhook log before %s: %w", r.Before.UTC().Format(time.RFC3339), err)
		}
		if res.Next == "" {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		r.Cursor = res.Next
	}
}

// retain runs Prune shortly after start and then every PruneInterval,
// until ctx is done. It runs beside the delivery loop, never in it: a long
// pass delays no attempt.
func (e *Engine) retain(ctx context.Context) {
	if e.b.Pruner == nil || e.cfg.Retention < 0 {
		return
	}
	t := time.NewTimer(min(e.cfg.PruneInterval, pruneStart))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		res, err := e.Prune(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Error("pruning the webhook log failed", zap.Int("events_removed", res.Events),
				zap.Int("deliveries_removed", res.Deliveries), zap.Error(err))
		case err == nil:
			e.log.Info("pruned the webhook log", zap.Duration("retention", e.cfg.Retention),
				zap.Int("events_removed", res.Events), zap.Int("deliveries_removed", res.Deliveries),
				zap.Duration("took", time.Since(start)))
		}
		t.Reset(e.cfg.PruneInterval)
	}
}
