package proposals_test

import (
	"context"
	"encoding/json"
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

var (
	simSeed  = flag.Uint64("seed", 0, "replay one schedule of the proposals' simulation, with its trace")
	simSeeds = flag.Int("seeds", 300, "how many schedules the proposals' simulation runs")
)

// quoteDate is every simulated quote's date, its engagement's created_at.
var quoteDate = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// xeroQuote makes a simulated quote an engagement as the Xero ledger's
// adapter does: the state through Status, the title through Scope, and
// signed_at through Signings, the vendor's modification time of the first
// state seen accepted.
func xeroQuote(ctx context.Context, state changes.StateStore, r readmodelsim.Record) (json.RawMessage, error) {
	status, err := proposals.Status(r.State)
	if err != nil {
		return nil, err
	}
	e := practice.Engagement{ID: r.ID, Object: "engagement", Client: practice.Known("cli_sim"), Status: status,
		Scope: proposals.Scope(r.Name, []string{"Accounts preparation"}), Fee: practice.Money{Amount: "1200.00", Currency: "GBP"},
		Billing: "fixed", ReleasedJobs: []string{}, CreatedAt: &quoteDate, UpdatedAt: r.Updated.UTC(), Version: r.Version}
	signings := proposals.Signings{State: state, Firm: "frm_sim"}
	if e.SignedAt, err = signings.At(ctx, r.ID, status == "signed", r.Updated); err != nil {
		return nil, err
	}
	return json.Marshal(&e)
}

// Engagements from a firm's quotes, under the read-model simulation's
// schedules: quotes created, sent, accepted, edited while accepted,
// declined and accepted again, invoiced, deleted, while two instances page
// and poll them (answers stale, pages shifted, leases lapsing, instances
// restarted, the feed trimmed). Every instance converges with the vendor,
// and engagement.signed is raised at most once per engagement, with the id
// dispatcher.SigningID gives its first signed_at, and exactly once for
// every quote accepted at the end whose acceptance came after the backfill.
func TestSyncSimulationWithProposals(t *testing.T) {
	if *simSeed != 0 {
		res := readmodelsim.Run(readmodelsim.Options{Seed: *simSeed, Proposals: xeroQuote, Trace: t.Logf})
		for _, d := range append(res.Divergences, signings(res)...) {
			t.Error(d)
		}
		return
	}
	ops, failed, signed := 0, 0, 0
	for s := 1; s <= *simSeeds; s++ {
		res := readmodelsim.Run(readmodelsim.Options{Seed: uint64(s), Proposals: xeroQuote})
		ops += res.Operations
		signed += len(res.AcceptedLate)
		if div := append(res.Divergences, signings(res)...); len(div) > 0 {
			failed++
			if failed <= 3 {
				t.Errorf("seed %d diverged (replay: go test ./adapters/kit/proposals -run TestSyncSimulationWithProposals -v -args -seed=%d):\n%s",
					s, s, div[0])
			}
		}
	}
	t.Logf("%d schedules, %d operations, %d quotes accepted after the backfill, %d diverged", *simSeeds, ops, signed, failed)
	if signed == 0 {
		t.Error("no schedule accepted a quote after the backfill: the schedules test no signing")
	}
}

// signings reads a run's change records as the dispatcher does and finds
// what breaks the once-per-signing rule.
func signings(res readmodelsim.Result) []string {
	var bad []string
	events := map[string]map[string]bool{} // engagement -> signing event ids
	for _, c := range res.Recorded {
		if c.Kind != practice.Engagements {
			continue
		}
		evs, err := dispatcher.Derive(c)
		if err != nil {
			bad = append(bad, "derive "+c.ID+": "+err.Error())
			continue
		}
		for _, ev := range evs {
			if ev.Event != dispatcher.EngagementSigned {
				continue
			}
			var e practice.Engagement
			if err := json.Unmarshal(c.After, &e); err != nil || e.SignedAt == nil {
				bad = append(bad, "signing of "+c.ResourceID+" whose engagement has no signed_at")
				continue
			}
			if want := dispatcher.SigningID(c.Firm, c.Sandbox, c.ResourceID, *e.SignedAt); ev.ID != want {
				bad = append(bad, "signing of "+c.ResourceID+" is "+ev.ID+", not "+want)
			}
			if events[c.ResourceID] == nil {
				events[c.ResourceID] = map[string]bool{}
			}
			events[c.ResourceID][ev.ID] = true
		}
	}
	for id, ids := range events {
		if len(ids) > 1 {
			bad = append(bad, "engagement "+id+" is signed "+itoa(len(ids))+" times")
		}
	}
	for _, id := range res.AcceptedLate {
		if len(events[id]) != 1 {
			bad = append(bad, "quote "+id+", accepted after the backfill, is signed "+itoa(len(events[id]))+" times")
		}
	}
	return bad
}

func itoa(n int) string { return strconv.Itoa(n) }

// The same schedules for a firm whose ledger is QuickBooks Online and
// whose proposals are its estimates: the ledger's one sync keeps invoices
// and engagements, and its one change data capture call answers both (the
// estimates as the page's Others), with time positions answered with an
// overlap, stale answers, deletions, and a look-back and a cap past which
// the sync reconciles. Every instance converges with the vendor, and the
// signings keep the once-per-engagement rule.
func TestSyncSimulationWithQuickBooksEstimates(t *testing.T) {
	opts := func(seed uint64) readmodelsim.Options {
		return readmodelsim.Options{Seed: seed, QuickBooksInvoices: true, QuickBooksEstimates: true, Proposals: xeroQuote}
	}
	if *simSeed != 0 {
		o := opts(*simSeed)
		o.Trace = t.Logf
		res := readmodelsim.Run(o)
		for _, d := range append(res.Divergences, signings(res)...) {
			t.Error(d)
		}
		return
	}
	ops, failed, signed := 0, 0, 0
	for s := 1; s <= *simSeeds; s++ {
		res := readmodelsim.Run(opts(uint64(s)))
		ops += res.Operations
		signed += len(res.AcceptedLate)
		if div := append(res.Divergences, signings(res)...); len(div) > 0 {
			failed++
			if failed <= 3 {
				t.Errorf("seed %d diverged (replay: go test ./adapters/kit/proposals -run TestSyncSimulationWithQuickBooksEstimates -v -args -seed=%d):\n%s",
					s, s, div[0])
			}
		}
	}
	t.Logf("%d schedules, %d operations, %d estimates accepted after the backfill, %d diverged", *simSeeds, ops, signed, failed)
	if signed == 0 {
		t.Error("no schedule accepted an estimate after the backfill: the schedules test no signing")
	}
}

var simClient = "cli_sim"
