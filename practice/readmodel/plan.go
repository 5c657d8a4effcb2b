package readmodel

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Allowance is a vendor's published limit on one account: Limit calls per
// Per (Karbon's 120 a minute, Xero's 60 a minute and 5,000 a day).
type Allowance struct {
	Limit int
	Per   time.Duration
}

// defaultSyncShare is the part of each allowance the syncs of one vendor
// account plan to spend between them: the rest is kept for /v1 writes
// and on-demand reads, which a firm would otherwise find refused after
// half a day.
const defaultSyncShare = 0.5

// SyncBudget is what a sync may plan to spend of its vendor account.
type SyncBudget struct {
	// Allowances are the account's published limits; none leaves the
	// configured poll interval alone.
	Allowances []Allowance
	// Account names the vendor account: syncs naming the same one
	// (Xero Practice Manager and the Xero ledger of one organisation)
	// share its allowances (ShareBudgets).
	Account string
	// Share is the part of each allowance this sync plans to spend;
	// zero is defaultSyncShare divided among the syncs of the account.
	Share float64
}

// ShareBudgets divides each vendor account's sync share among the syncs
// that spend it: two systems of one Xero organisation get a quarter of
// its allowances each.
func ShareBudgets(syncs []*Syncer) {
	n := map[string]int{}
	for _, s := range syncs {
		if len(s.budget.Allowances) > 0 {
			n[s.budget.Account]++
		}
	}
	for _, s := range syncs {
		if c := n[s.budget.Account]; c > 0 && s.budget.Share == 0 {
			s.budget.Share = defaultSyncShare / float64(c)
		}
	}
}

func (b SyncBudget) share() float64 {
	if b.Share > 0 {
		return b.Share
	}
	return defaultSyncShare
}

// What a pass of the sync is, for its measured cost.
const (
	passPoll = "poll/"
	passFull = "full/"
	passFeed = "feed"
)

// planner keeps what each pass of the sync costs in vendor calls, as
// measured, and turns it into poll intervals. It has its own lock: the
// intervals are asked for with and without the Syncer's.
type planner struct {
	mu    sync.Mutex
	costs map[string]float64
}

// planHeadroom is the part of its share the plan spends on average: the
// rest absorbs what the measured costs miss (a round that reads more pages
// than the last ones, a reconciliation and a backfill in the same day).
const planHeadroom = 0.9

// unknownPollCost is what a poll is taken to cost before one has been
// measured: its first page.
const unknownPollCost = 1

// observe folds a pass's calls into its cost. A poll's cost is smoothed,
// since a round in which much changed reads more pages; a full pass's is
// the last one's.
func (p *planner) observe(pass string, calls float64, restart bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.costs == nil {
		p.costs = map[string]float64{}
	}
	old, ok := p.costs[pass]
	switch {
	case strings.HasPrefix(pass, passFull) && !restart:
		p.costs[pass] = old + calls // another page of a backfill
	case !ok || strings.HasPrefix(pass, passFull):
		p.costs[pass] = calls
	default:
		p.costs[pass] = 0.7*old + 0.3*calls
	}
}

func (p *planner) snapshot() map[string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.costs) == 0 {
		return nil
	}
	out := make(map[string]float64, len(p.costs))
	for k, v := range p.costs {
		out[k] = v
	}
	return out
}

func (p *planner) load(costs map[string]float64) {
	if costs == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.costs = costs
}

func (p *planner) cost(pass string, unknown float64) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.costs[pass]; ok {
		return max(c, 0)
	}
	return unknown
}

// unit is one thing the sync polls on its own schedule: the vendor's
// change feed, or one kind.
type unit struct {
	pass string
	cost float64
}

// pollUnits are what the sync polls, with the cost of a round of each.
func (s *Syncer) pollUnits() []unit {
	if s.vendorFeed != nil {
		return []unit{{passFeed, s.plan.cost(passFeed, unknownPollCost)}}
	}
	var us []unit
	for _, k := range s.sys.Kinds {
		unknown := float64(unknownPollCost)
		if !s.incremental(k) {
			// Its poll lists every record, as its backfill did.
			unknown = s.plan.cost(passFull+string(k), unknownPollCost)
		}
		us = append(us, unit{passPoll + string(k), s.plan.cost(passPoll+string(k), unknown)})
	}
	return us
}

// schedule is the plan: how often each unit is polled, and what the sync
// expects to spend of its tightest allowance.
type schedule struct {
	every map[string]time.Duration
	// tightest is the allowance with the longest period (the day), and
	// planned the calls a period of it the plan spends.
	tightest Allowance
	planned  float64
}

// plan spaces the polls so that, with a full pass of every kind each
// reconciliation interval, the sync spends at most its share of each
// allowance. Each polled unit gets an equal part of what is left; a
// cheap unit that would poll more often than the configured interval
// polls at that interval (a floor), and what it leaves goes to the
// others. A unit never polls less often than the reconciliation.
func (s *Syncer) schedule() schedule {
	units := s.pollUnits()
	sc := schedule{every: map[string]time.Duration{}}
	for _, u := range units {
		sc.every[u.pass] = s.config.Poll
	}
	var full float64
	for _, k := range s.sys.Kinds {
		full += s.plan.cost(passFull+string(k), 0)
	}
	for _, a := range s.budget.Allowances {
		if a.Limit <= 0 || a.Per <= 0 {
			continue
		}
		perPeriod := float64(a.Per) / float64(s.config.Reconcile)
		left := planHeadroom*s.budget.share()*float64(a.Limit) - full*perPeriod
		for pass, every := range spread(units, a.Per, left, s.config.Poll, s.config.Reconcile) {
			sc.every[pass] = max(sc.every[pass], every)
		}
		if a.Per >= sc.tightest.Per {
			sc.tightest = a
		}
	}
	if sc.tightest.Per > 0 {
		per := float64(sc.tightest.Per)
		sc.planned = full * per / float64(s.config.Reconcile)
		for _, u := range units {
			sc.planned += u.cost * per / float64(sc.every[u.pass])
		}
	}
	return sc
}

// spread shares left calls per period among units: the cheapest first,
// each at most its equal part of what the others have not taken.
func spread(units []unit, per time.Duration, left float64, floor, ceiling time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	order := slices.Clone(units)
	slices.SortStableFunc(order, func(a, b unit) int { return cmp.Compare(a.cost, b.cost) })
	for i, u := range order {
		part := left / float64(len(order)-i)
		every := ceiling
		if part > 0 {
			every = time.Duration(math.Ceil(float64(per) * u.cost / part))
		}
		every = min(max(every, floor), ceiling).Round(time.Second)
		if every < floor {
			every = floor
		}
		out[u.pass] = every
		left -= u.cost * float64(per) / float64(every)
	}
	return out
}

// pollEvery is how often k is polled under the plan.
func (s *Syncer) pollEvery(k practice.Kind) time.Duration {
	sc := s.schedule()
	if s.vendorFeed != nil {
		return sc.every[passFeed]
	}
	if every, ok := sc.every[passPoll+string(k)]; ok {
		return every
	}
	return s.config.Poll
}

// metered runs a pass and folds the vendor calls it made into its cost.
// Calls made meanwhile by other users of the account's client (a write, a
// read) count too: a little caution, never an overspend.
func (s *Syncer) metered(pass string, restart bool, fn func() error) error {
	if s.vendorCalls == nil {
		return fn()
	}
	before := s.vendorCalls()
	err := fn()
	if err == nil {
		s.plan.observe(pass, float64(s.vendorCalls()-before), restart)
	}
	return err
}

// Plan is the sync's plan of vendor calls, as the status shows it.
type Plan struct {
	// PollEvery is how often each polled kind (or the change feed, as
	// "feed") is read.
	PollEvery map[string]time.Duration
	// CallsPerPeriod are the calls the plan expects to spend per Period,
	// the period of the tightest allowance, of Limit allowed; zero
	// Limit when the vendor publishes none the sync knows.
	CallsPerPeriod int
	Limit          int
	Period         time.Duration
	// Share is the part of Limit the sync may spend.
	Share float64
}

// String says the plan for people: "polls clients every 1m, jobs every
// 8m10s: about 1,100 of 5,000 calls a day, at most 1,250 for this sync".
func (p Plan) String() string {
	if len(p.PollEvery) == 0 {
		return ""
	}
	var parts []string
	names := make([]string, 0, len(p.PollEvery))
	for name := range p.PollEvery {
		names = append(names, name)
	}
	slices.Sort(names)
	same := true
	for _, n := range names {
		same = same && p.PollEvery[n] == p.PollEvery[names[0]]
	}
	if same {
		parts = append(parts, "every "+shortDuration(p.PollEvery[names[0]]))
	} else {
		for _, n := range names {
			parts = append(parts, n+" every "+shortDuration(p.PollEvery[n]))
		}
	}
	out := "polls " + strings.Join(parts, ", ")
	if p.Limit > 0 {
		out += fmt.Sprintf(": about %s of %s calls %s, at most %s for this sync", thousands(p.CallsPerPeriod),
			thousands(p.Limit), perWord(p.Period), thousands(int(p.Share*float64(p.Limit))))
	}
	return out
}

func perWord(d time.Duration) string {
	switch d {
	case 24 * time.Hour:
		return "a day"
	case time.Hour:
		return "an hour"
	case time.Minute:
		return "a minute"
	}
	return "per " + shortDuration(d)
}

// shortDuration drops the zero units time.Duration prints ("4m30s", "1m").
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// describePlan fills the status's plan.
func (s *Syncer) describePlan(st *Status) {
	sc := s.schedule()
	p := Plan{PollEvery: map[string]time.Duration{}, Share: s.budget.share()}
	for pass, every := range sc.every {
		p.PollEvery[strings.TrimPrefix(pass, passPoll)] = every
	}
	if sc.tightest.Limit > 0 {
		p.CallsPerPeriod = int(math.Ceil(sc.planned))
		p.Limit, p.Period = sc.tightest.Limit, sc.tightest.Per
	}
	st.Plan = p
}
