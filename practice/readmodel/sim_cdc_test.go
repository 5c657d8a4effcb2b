package readmodel_test

import (
	"testing"

	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// The same schedules for a firm whose ledger is QuickBooks Online,
// followed through its change data capture: positions are times answered
// with an overlap, answers arrive stale, deletions come as Gone, and a
// position past the look-back or an answer at the cap reconciles instead;
// every invoice created after the backfill is announced. Replay with
// -run TestSyncSimulationWithQuickBooksInvoices -args -seed=N.
func TestSyncSimulationWithQuickBooksInvoices(t *testing.T) {
	if *simSeed != 0 {
		res := readmodelsim.Run(readmodelsim.Options{Seed: *simSeed, QuickBooksInvoices: true, Trace: t.Logf})
		for _, d := range res.Divergences {
			t.Error(d)
		}
		return
	}
	ops, failed := 0, 0
	for s := 1; s <= *simSeeds; s++ {
		res := readmodelsim.Run(readmodelsim.Options{Seed: uint64(s), QuickBooksInvoices: true})
		ops += res.Operations
		if len(res.Divergences) > 0 {
			failed++
			if failed <= 3 {
				t.Errorf("seed %d diverged (replay: go test ./practice/readmodel -run TestSyncSimulationWithQuickBooksInvoices -v -args -seed=%d):\n%s",
					s, s, res.Divergences[0])
			}
		}
	}
	t.Logf("%d schedules, %d operations, %d diverged", *simSeeds, ops, failed)
}
