package readmodel_test

import (
	"testing"

	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// The same schedules with the instances holding the firm and letting go
// of it between steps, as the placement of firms over a memory bound
// does (joins, hand-overs, kills that start again holding the firm or
// not), with callers reading through either instance: every instance's
// answers converge with the vendor, the change records never reverse or
// repeat, and no caller is answered a record older than one it was
// answered before. Replay with -run TestSyncSimulationWithMembership
// -args -seed=N.
func TestSyncSimulationWithMembership(t *testing.T) {
	if *simSeed != 0 {
		res := readmodelsim.Run(readmodelsim.Options{Seed: *simSeed, Membership: true, Trace: t.Logf})
		for _, d := range res.Divergences {
			t.Error(d)
		}
		return
	}
	ops, failed := 0, 0
	for s := 1; s <= *simSeeds; s++ {
		res := readmodelsim.Run(readmodelsim.Options{Seed: uint64(s), Membership: true})
		ops += res.Operations
		if len(res.Divergences) > 0 {
			failed++
			if failed <= 3 {
				t.Errorf("seed %d diverged (replay: go test ./practice/readmodel -run TestSyncSimulationWithMembership -v -args -seed=%d):\n%s",
					s, s, res.Divergences[0])
			}
		}
	}
	t.Logf("%d schedules, %d operations, %d diverged", *simSeeds, ops, failed)
	if failed > 0 {
		t.Errorf("%d of %d schedules diverged", failed, *simSeeds)
	}
}
