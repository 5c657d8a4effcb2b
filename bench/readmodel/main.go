// Command readmodel measures /v1 reads served from the read model of a
// firm on real systems (Karbon, Xero, SharePoint doubles from
// adapters/vendortest) against the same reads over the demo records, in
// one gateway (the real binary) and one run (issue #16):
//
//   - /v1 p50/p99 at a steady rate, next to a demo-records firm under the
//     same mix at the same rate; target p99 within 1.5x of demo;
//   - the vendor calls made during the read load, next to those the sync
//     alone makes over an equal idle window; target: equal (reads cause
//     none).
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
	idle0 := hitsOf(firms)
	time.Sleep(d)
	idle := sub(hitsOf(firms), idle0)

	roundStart(firms[0], 2*poll+10*time.Second)
	var profErr error
	var pw sync.WaitGroup
	if profile != "" {
		pw.Add(1)
		go func() { defer pw.Done(); profErr = g.profile(profile, d) }()
	}
	cpu0 := g.cpu()
	load0 := hitsOf(firms)
	lat, _, err := g.load(tenants, rate, d)
	loaded := sub(hitsOf(firms), load0)
	cpuLoad := g.cpu() - cpu0
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
	fmt.Printf("\nvendor calls over %s windows, each from the start of a sync round\n", d)
	for _, f := range firms {
		fmt.Printf("%s  %s: sync alone (idle) %s; during the read load %s; caused by reads %d (target 0)\n",
			verdict(loaded[f.id].total() <= idle[f.id].total()), f.id, idle[f.id], loaded[f.id], max(0, loaded[f.id].total()-idle[f.id].total()))
	}
	return nil
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

func hitsOf(firms []firm) map[string]hits {
	out := map[string]hits{}
	for _, f := range firms {
		out[f.id] = f.v.hits()
	}
	return out
}

func sub(a, b map[string]hits) map[string]hits {
	out := map[string]hits{}
	for k := range a {
		out[k] = a[k].sub(b[k])
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
