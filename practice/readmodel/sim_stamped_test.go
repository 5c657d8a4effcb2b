package readmodel_test

import (
	"flag"
	"testing"

	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

var simStamped = flag.Bool("stamped", false, "with -seed: replay the schedule with stamped jobs")

// The sync simulation with jobs that publish no modification time, as
// Karbon's work items: the adapter stamps every job it reads in the
// upstream state store the two instances share (their clocks a few
// milliseconds apart), under the same schedules (changes racing reads,
// instances restarted, webhooks late and lost): every instance ends on
// the vendor's content at the version of its shared stamp, and the change
// records of a job never go back or repeat a version. Replay with
// -seed=N -stamped.
func TestSyncSimulationWithStampedJobs(t *testing.T) {
	if *simSeed != 0 {
		if !*simStamped {
			t.Skip("replaying another simulation")
		}
		res := readmodelsim.Run(readmodelsim.Options{Seed: *simSeed, Trace: t.Logf, Stamped: true})
		for _, d := range res.Divergences {
			t.Error(d)
		}
		return
	}
	ops, changes, failed := 0, 0, 0
	for s := 1; s <= *simSeeds; s++ {
		res := readmodelsim.Run(readmodelsim.Options{Seed: uint64(s), Stamped: true})
		ops += res.Operations
		changes += res.Changes
		if len(res.Divergences) > 0 {
			failed++
			if failed <= 3 {
				t.Errorf("seed %d diverged (replay: go test ./practice/readmodel -run TestSyncSimulationWithStampedJobs -v -args -seed=%d -stamped):\n%s",
					s, s, res.Divergences[0])
			}
		}
	}
	t.Logf("%d schedules, %d operations, %d change records, %d diverged", *simSeeds, ops, changes, failed)
}
