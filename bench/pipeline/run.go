package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// pipeline is one mode set up afresh for one run.
type pipeline interface {
	// create makes one change through the API's write path and returns
	// the new client's id.
	create(ctx context.Context, name string) (string, error)
	// preload queues n synthetic changes before start and returns their
	// client ids.
	preload(ctx context.Context, n int) ([]string, error)
	// endpoint registers url for every event.
	endpoint(ctx context.Context, url string) error
	// start runs the pipeline's stages until close.
	start(ctx context.Context)
	close()
}

type opener func(ctx context.Context) (pipeline, error)

type result struct {
	events   int
	missing  int
	lat      []time.Duration
	rate     float64 // deliveries per second, or changes offered per second
	rateUnit string
}

func (r result) print(mode, name string) {
	pct := func(p float64) string {
		if len(r.lat) == 0 {
			return "-"
		}
		s := slices.Clone(r.lat)
		slices.Sort(s)
		return fmtDur(s[int(p*float64(len(s)-1))])
	}
	line := fmt.Sprintf("%-9s %-36s %7d %9s %9s %9s %8.0f %s", mode, name, r.events, pct(0.5), pct(0.99), pct(1), r.rate, r.rateUnit)
	if r.missing > 0 {
		line += fmt.Sprintf("  (%d never arrived)", r.missing)
	}
	fmt.Println(line)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// writers is how many changes may be in the write path at once, as
// concurrent API requests would be.
const writers = 16

// fixedRate makes rate changes a second for d and measures each from the
// moment it was due to be made (so a stalled writer counts against the
// pipeline, not in its favour) to its webhook. With dead, a second
// endpoint that never answers receives every event too.
func fixedRate(ctx context.Context, open opener, rate int, d time.Duration, dead bool) (result, error) {
	// Receivers close after the pipeline (defers run last first), so
	// that no request is still coming when they do.
	rc := newReceiver(false)
	defer rc.close()
	black := newReceiver(true)
	defer black.close()
	p, err := open(ctx)
	if err != nil {
		return result{}, err
	}
	defer p.close()
	if err := p.endpoint(ctx, rc.url()); err != nil {
		return result{}, err
	}
	if dead {
		if err := p.endpoint(ctx, black.url()); err != nil {
			return result{}, err
		}
	}
	p.start(ctx)
	// Measure the steady state: the first change waits for the pipeline to
	// come up (a Kafka consumer joining its group), which is not latency.
	warm, err := p.create(ctx, "Warm-up")
	if err != nil {
		return result{}, err
	}
	if got := rc.wait([]string{warm}, 30*time.Second); len(got) != 1 {
		return result{}, fmt.Errorf("the warm-up change was not delivered")
	}

	var (
		mu     sync.Mutex
		due    = map[string]time.Time{}
		failed int
		wg     sync.WaitGroup
	)
	jobs := make(chan time.Time, rate)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for at := range jobs {
				id, err := p.create(ctx, "Bench & Co")
				mu.Lock()
				if err != nil {
					failed++
				} else {
					due[id] = at
				}
				mu.Unlock()
			}
		}()
	}
	n := int(float64(rate) * d.Seconds())
	begin := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range n {
		at := begin.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		jobs <- at
	}
	close(jobs)
	wg.Wait()
	offered := float64(n) / time.Since(begin).Seconds()
	if failed > 0 {
		return result{}, fmt.Errorf("%d of %d writes failed", failed, n)
	}
	ids := make([]string, 0, len(due))
	for id := range due {
		ids = append(ids, id)
	}
	arrived := rc.wait(ids, 60*time.Second)
	res := result{events: n, missing: n - len(arrived), rate: offered, rateUnit: "changes/s"}
	for id, at := range arrived {
		res.lat = append(res.lat, at.Sub(due[id]))
	}
	return res, nil
}

// saturation preloads n changes, starts the pipeline and measures how fast
// it delivers them all, from its start (consumer group join included) to
// the last delivery.
func saturation(ctx context.Context, open opener, n int) (result, error) {
	rc := newReceiver(false)
	defer rc.close()
	p, err := open(ctx)
	if err != nil {
		return result{}, err
	}
	defer p.close()
	if err := p.endpoint(ctx, rc.url()); err != nil {
		return result{}, err
	}
	ids, err := p.preload(ctx, n)
	if err != nil {
		return result{}, err
	}
	begin := time.Now()
	p.start(ctx)
	arrived := rc.wait(ids, 5*time.Minute)
	var last time.Time
	for _, at := range arrived {
		if at.After(last) {
			last = at
		}
	}
	return result{events: n, missing: n - len(arrived), rate: float64(len(arrived)) / last.Sub(begin).Seconds(),
		rateUnit: "deliveries/s"}, nil
}
