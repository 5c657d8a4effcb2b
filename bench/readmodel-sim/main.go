// Command readmodel-sim runs the read model's sync simulation
// (practice/readmodel/readmodelsim) over thousands of seeds and prints
// how many schedules ran, the operations in them, and the divergences
// found (target: 0). A divergent seed replays with
//
//	go test ./practice/readmodel -run TestSyncSimulation -v -args -seed=N
//
// Usage:
//
//	go run ./bench/readmodel-sim [-seeds 5000] [-from 1] [-events 300] [-quickbooks-invoices] [-stamped]
//
// -quickbooks-invoices adds the ledger's invoices as QuickBooks Online
// gives them, followed through its change data capture; a divergent seed
// of it replays with -run TestSyncSimulationWithQuickBooksInvoices.
// -stamped makes the jobs publish no modification time, stamped by the
// gateway in the state store the instances share (Karbon's work items);
// a divergent seed replays with -run TestSyncSimulationWithStampedJobs
// -args -seed=N -stamped.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

func main() {
	seeds := flag.Int("seeds", 5000, "how many schedules to run")
	from := flag.Uint64("from", 1, "the first seed")
	events := flag.Int("events", 300, "events per schedule before the vendor goes quiet")
	qbo := flag.Bool("quickbooks-invoices", false, "add QuickBooks Online's invoices, followed through its change data capture")
	stamped := flag.Bool("stamped", false, "jobs publish no modification time: the gateway stamps them")
	flag.Parse()
	start := time.Now()
	ops, changes, divergent := 0, 0, 0
	var first []string
	for i := range *seeds {
		res := readmodelsim.Run(readmodelsim.Options{Seed: *from + uint64(i), Events: *events, QuickBooksInvoices: *qbo, Stamped: *stamped})
		ops += res.Operations
		changes += res.Changes
		if len(res.Divergences) > 0 {
			divergent++
			if len(first) < 5 {
				first = append(first, res.Divergences[0])
			}
		}
	}
	fmt.Printf("read model sync simulation: %d schedules (seeds %d-%d), %d operations, %d change records, %d divergent schedules, in %v\n",
		*seeds, *from, *from+uint64(*seeds)-1, ops, changes, divergent, time.Since(start).Round(time.Millisecond))
	for _, d := range first {
		fmt.Println("  ", d)
	}
	if divergent > 0 {
		os.Exit(1)
	}
}
