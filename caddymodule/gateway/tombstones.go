package gateway

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
)

// sweepTombstones forgets the tombstones every firm's read model keeps
// beyond practice.TombstoneRetention. Every instance sweeps: the sweep
// is idempotent, and none has to be the one that does it.
func (a *App) sweepTombstones(ctx context.Context, now time.Time) {
	before := now.Add(-practice.TombstoneRetention)
	for firm, b := range a.firms {
		if b.model == nil || !b.model.Loaded() {
			// A firm held elsewhere is swept by its holders.
			continue
		}
		if _, err := b.model.SweepTombstones(ctx, before, now); err != nil {
			a.logger.Warn("sweeping tombstones", zap.String("firm", firm), zap.Error(err))
		}
	}
}
