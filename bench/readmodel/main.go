// Command readmodel measures /v1 reads served from the read model of a
// firm on real systems (Karbon, Xero, SharePoint doubles from
// adapters/vendortest) against the same reads over the demo records, in
// one gateway (the real binary) and one run (issue #16):
//
//   - /v1 p50/p99 at a steady rate, next to a demo-records firm under the
//     same mix at the same rate; target p99 within 1.5x of demo;
//   - the vendor calls made during the read load, next to those the sync
//     alone makes over an equal idle window, each vendor's counted in the
//     whole sync rounds that began in the window; target: the read load's
//     rounds cost what idle rounds do (reads cause none).
//
// With -large a second real firm (50,000 work items, 10,000 clients,
// 30,000 invoices) is added: the backfill's duration, vendor calls and
// peak calls a minute per vendor are printed against the budget used and
// the vendors' published limits, and its page p99 (plain and filtered)
// next to the small firm's; target at most 1.2x.
//
// Run it through bench/readmodel.sh.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	var (
		bin      = flag.String("bin", "", "the practicegw binary (required)")
		duration = flag.Duration("duration", 60*time.Second, "length of the read load, and of the idle window")
		rate     = flag.Int("rate", 20, "reads a second to each firm")
		poll     = flag.Duration("poll", 15*time.Second, "the sync's poll interval (PRACTICEGW_SYNC_POLL)")
		big      = flag.Bool("large", false, "add a large firm and measure its backfill")
		kLimit   = flag.String("karbon-limit", "6000/m", "the Karbon budget configured (published: 120/m)")
		xLimit   = flag.String("xero-limit", "3000/m", "the Xero budget configured (published: 60/m)")
		profile  = flag.String("profile", "", "write a CPU profile of the gateway during the read load here")
	)
	flag.Parse()
	if *bin == "" {
		fail(fmt.Errorf("-bin is required"))
	}
	if err := run(*bin, *duration, *rate, *poll, *big, *kLimit, *xLimit, *profile); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "readmodel:", err)
	os.Exit(1)
}

// firm is a firm on real systems and its doubles.
type firm struct {
	id   string
	size size
	v    vendors
}

// sampler records every double's request count every 200 ms.
type sampler struct {
	mu      sync.Mutex
	samples map[string][]sample
	stop    chan struct{}
	done    sync.WaitGroup
}

type sample struct {
	at time.Time
	h  hits
}

func startSampler(firms []firm) *sampler {
	s := &sampler{samples: map[string][]sample{}, stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			now := time.Now()
			s.mu.Lock()
			for _, f := range firms {
				s.samples[f.id] = append(s.samples[f.id], sample{now, f.v.hits()})
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) close() { close(s.stop); s.done.Wait() }

// peak is the most calls each vendor received in any minute between from
// and to.
func (s *sampler) peak(firm string, from, to time.Time) hits {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.samples[firm]
	var p hits
	j := 0
	for i := range ss {
		if ss[i].at.Before(from) || ss[i].at.After(to) {
			continue
		}
		for j < i && ss[i].at.Sub(ss[j].at) > time.Minute {
			j++
		}
		d := ss[i].h.sub(ss[j].h)
		p = hits{max(p.karbon, d.karbon), max(p.xero, d.xero), max(p.graph, d.graph)}
	}
	return p
}

// roundStart waits until a sync round of firm begins: its Karbon double
// receives a request after a quiet second, so that two windows started
// this way hold the same rounds.
func roundStart(f firm, within time.Duration) {
	deadline := time.Now().Add(within)
	last, quietSince := f.v.k.Faults.Hits(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n := f.v.k.Faults.Hits()
		if n != last {
			if time.Since(quietSince) >= time.Second {
				return
			}
			last, quietSince = n, time.Now()
		}
	}
}

func run(bin string, d time.Duration, rate int, poll time.Duration, big bool, kLimit, xLimit, profile string) error {
	fmt.Printf("read model benchmark: %d reads/s to each firm for %s; sync poll %s; vendor budgets configured Karbon %s, Xero %s (published: 120/m, 60/m)\n",
		rate, d, poll, kLimit, xLimit)
	firms := []firm{{id: "frm_small", size: small}}
	if big {
		firms = append(firms, firm{id: "frm_large", size: large})
	}
	var blocks []string
	for i := range firms {
		start := time.Now()
		firms[i].v = startVendors(firms[i].size)
		defer firms[i].v.close()
		fmt.Printf("%s: %s (doubles filled in %s)\n", firms[i].id, firms[i].size, time.Since(start).Round(time.Millisecond))
		blocks = append(blocks, firms[i].v.firmBlock(firms[i].id, kLimit, xLimit))
	}
	smp := startSampler(firms)
	defer smp.close()
	g, err := startGateway(bin, caddyfile(blocks...), poll)
	if err != nil {
		return err
	}
	defer g.stop()

	// Backfill: from the gateway's start until every sync of the firm is
	// live.
	fmt.Println()
	live := map[string]time.Time{}
	lastShown := time.Now()
	for len(live) < len(firms) {
		if time.Since(g.started) > 30*time.Minute {
			return fmt.Errorf("backfill not done after 30 minutes:\n%s", tail(g.logs.String()))
		}
		for _, f := range firms {
			if _, ok := live[f.id]; ok {
				continue
			}
			ok, details, err := g.live(f.id)
			if err != nil {
				return err
			}
			if ok {
				live[f.id] = time.Now()
				continue
			}
			if time.Since(lastShown) > 15*time.Second {
				slices.Sort(details)
				fmt.Printf("  %5.0fs %s\n", time.Since(g.started).Seconds(), strings.Join(details, "; "))
			}
		}
		if time.Since(lastShown) > 15*time.Second {
			lastShown = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("%-10s %10s %44s  %s\n", "backfill", "duration", "vendor calls", "peak calls in any minute (budget used / published)")
	cpu := g.cpu()
	for _, f := range firms {
		took := live[f.id].Sub(g.started)
		calls := smp.at(f.id, live[f.id])
		p := smp.peak(f.id, g.started, live[f.id])
		fmt.Printf("%-10s %10s %44s  Karbon %d (%s / 120/m), Xero %d (%s / 60/m), SharePoint %d\n", f.id, took.Round(100*time.Millisecond),
			calls.String(), p.karbon, kLimit, p.xero, xLimit, p.graph)
		fmt.Printf("%-10s %10s  at the published limits this backfill needs at least %s (Karbon %d calls at 120/m, Xero %d at 60/m)\n", "", "",
			time.Duration(max(float64(calls.karbon)/120, float64(calls.xero)/60)*float64(time.Minute)).Round(time.Second), calls.karbon, calls.xero)
	}
	fmt.Printf("gateway CPU to the end of the backfill: %s\n", cpu.Round(10*time.Millisecond))

	tenants := []tenant{}
	for _, id := range append([]string{"frm_demo"}, ids(firms)...) {
		tok, err := g.issue(id)
		if err != nil {
			return err
		}
		t, err := g.mixFor(id, tok)
		if err != nil {
			return err
		}
		tenants = append(tenants, t)
	}

	// The idle window, then the read load, each from the start of a sync
	// round.
	roundStart(firms[0], 2*poll+10*time.Second)
	idleFrom := time.Now()
	time.Sleep(d)
	idleTo := time.Now()

	roundStart(firms[0], 2*poll+10*time.Second)
	var profErr error
	var pw sync.WaitGroup
	if profile != "" {
		pw.Add(1)
		go func() { defer pw.Done(); profErr = g.profile(profile, d) }()
	}
	cpu0 := g.cpu()
	loadFrom := time.Now()
	lat, _, err := g.load(tenants, rate, d)
	loadTo := time.Now()
	cpuLoad := g.cpu() - cpu0
	// The sampler has seen the sync round that began last.
	time.Sleep(time.Second)
	pw.Wait()
	if err != nil {
		return err
	}
	if profErr != nil {
		fmt.Println("profile:", profErr)
	}

	fmt.Printf("\n/v1 reads, %d/s to each of %d firms for %s (mix: 6 plain pages, 3 filtered pages, 5 single reads), measured from when each was due; gateway CPU %s (%.0f%% of a core)\n",
		rate, len(tenants), d, cpuLoad.Round(10*time.Millisecond), 100*cpuLoad.Seconds()/d.Seconds())
	fmt.Printf("%-10s %-14s %7s %10s %10s %10s\n", "firm", "reads", "count", "p50", "p99", "max")
	for _, t := range tenants {
		l := lat[t.firm]
		for _, c := range []class{plain, filtered, single} {
			fmt.Printf("%-10s %-14s %7d %10s %10s %10s\n", t.firm, c, len(l[c]), ms(pct(l[c], .5)), ms(pct(l[c], .99)), ms(pct(l[c], 1)))
		}
		all := l.all()
		fmt.Printf("%-10s %-14s %7d %10s %10s %10s\n", t.firm, "all", len(all), ms(pct(all, .5)), ms(pct(all, .99)), ms(pct(all, 1)))
	}
	demo := pct(lat["frm_demo"].all(), .99)
	fmt.Println()
	for _, f := range firms {
		p := pct(lat[f.id].all(), .99)
		fmt.Printf("%s  p99 %s vs demo %s: %.2fx (target <= 1.5x)\n", verdict(p.Seconds() <= 1.5*demo.Seconds()), ms(p), ms(demo), p.Seconds()/demo.Seconds())
	}
	if big {
		for _, c := range []class{plain, filtered} {
			s, l := pct(lat["frm_small"][c], .99), pct(lat["frm_large"][c], .99)
			fmt.Printf("%s  large firm %s p99 %s vs small firm %s: %.2fx (target <= 1.2x)\n", verdict(l.Seconds() <= 1.2*s.Seconds()), c, ms(l), ms(s), l.Seconds()/s.Seconds())
		}
	}
	// Each vendor's sync rounds run on their own clock, so each vendor's
	// calls are counted over the whole rounds that began in a window: a
	// window that cuts a round in two would count part of it.
	fmt.Printf("\nvendor calls in the whole sync rounds that began in a %s window, idle and during the read load\n", d)
	for _, f := range firms {
		var line []string
		caused := 0
		for _, v := range vendorsOf {
			idle := smp.rounds(f.id, v.pick, idleFrom, idleTo)
			loaded := smp.rounds(f.id, v.pick, loadFrom, loadTo)
			// What the sync alone would have spent in the loaded window's
			// rounds, at its idle cost a round.
			expected := 0
			if idle.n > 0 {
				expected = int(math.Round(float64(idle.calls) / float64(idle.n) * float64(loaded.n)))
			}
			caused += max(0, loaded.calls-expected)
			line = append(line, fmt.Sprintf("%s %d in %d rounds idle, %d in %d during reads", v.name, idle.calls, idle.n, loaded.calls, loaded.n))
		}
		fmt.Printf("%s  %s: %s; caused by reads %d (target 0)\n", verdict(caused == 0), f.id, strings.Join(line, "; "), caused)
	}
	return nil
}

// vendorsOf picks each vendor's count out of a firm's.
var vendorsOf = []struct {
	name string
	pick func(hits) int
}{
	{"Karbon", func(h hits) int { return h.karbon }},
	{"Xero", func(h hits) int { return h.xero }},
	{"SharePoint", func(h hits) int { return h.graph }},
}

// rounds is one vendor's calls in n whole sync rounds.
type rounds struct{ calls, n int }

// rounds counts one vendor's calls in the sync rounds that began in
// [from, to): a round begins when calls come after a second without any,
// and the calls of the last round that began in the window are counted
// whole.
func (s *sampler) rounds(firm string, pick func(hits) int, from, to time.Time) rounds {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.samples[firm]
	var r rounds
	var starts []int
	lastChange := time.Time{}
	for i := 1; i < len(ss); i++ {
		if pick(ss[i].h) == pick(ss[i-1].h) {
			continue
		}
		if ss[i].at.Sub(lastChange) >= time.Second && !ss[i].at.Before(from) {
			starts = append(starts, i)
		}
		lastChange = ss[i].at
	}
	var in []int
	for _, i := range starts {
		if ss[i].at.Before(to) {
			in = append(in, i)
		}
	}
	if len(in) == 0 {
		return r
	}
	// A round ends where the next begins, or at the last sample.
	end := func(k int) int {
		for _, i := range starts {
			if i > in[k] {
				return pick(ss[i-1].h)
			}
		}
		return pick(ss[len(ss)-1].h)
	}
	for k, i := range in {
		r.calls += end(k) - pick(ss[i-1].h)
	}
	r.n = len(in)
	return r
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func ids(firms []firm) []string {
	var out []string
	for _, f := range firms {
		out = append(out, f.id)
	}
	return out
}

// at is the firm's request counts at the last sample no later than t.
func (s *sampler) at(firm string, t time.Time) hits {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.samples[firm]
	i := sort.Search(len(ss), func(i int) bool { return ss[i].at.After(t) })
	if i == 0 {
		return hits{}
	}
	return ss[i-1].h
}
