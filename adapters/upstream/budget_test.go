package upstream_test

import (
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/store/storetest"
)

// In one process the two clients are the one LocalBudget every adapter
// shares; time passes on an injected clock.
func TestLocalBudgetConformance(t *testing.T) {
	storetest.Budget(t, func(t *testing.T) (upstream.Budget, upstream.Budget, func(time.Duration)) {
		clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
		b := upstream.NewLocalBudget(clock)
		return b, b, clock.Advance
	})
}
