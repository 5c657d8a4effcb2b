package gateway

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// tombstoneStore keeps the tombstones of records removed from firms' read
// models and sweeps those past their retention.
type tombstoneStore interface {
	readmodel.TombstoneStore
	SweepTombstones(ctx context.Context, firm string, before time.Time) (int, error)
}

// sweepTombstones removes the tombstones of every firm with real systems
// older than practice.TombstoneRetention. Every instance sweeps: the
// sweep is idempotent, and none has to be the one that does it.
func (a *App) sweepTombstones(ctx context.Context, now time.Time) {
	if a.tombstones == nil {
		return
	}
	before := now.Add(-practice.TombstoneRetention)
	for firm, b := range a.firms {
		if b.model == nil {
			continue
		}
		if _, err := a.tombstones.SweepTombstones(ctx, firm, before); err != nil {
			a.logger.Warn("sweeping tombstones", zap.String("firm", firm), zap.Error(err))
		}
	}
}
