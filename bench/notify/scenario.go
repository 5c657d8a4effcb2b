package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/internal/testgateway"
)

// scenario is one system's bursts, run one after the other.
type scenario struct {
	system string
	label  string
	// path is where the system's notifications come to the gateway.
	path   string
	bursts []burst
	// calls note the gateway's calls to the system's double.
	calls *callLog
}

// burst is one kind of change made burst times.
type burst struct {
	event string
	order int
	// change makes the i-th change and answers the id of the record the
	// webhook names.
	change func(i int) (string, error)
	// names reports whether a notification's body names the i-th change
	// (nil: any notification after it tells it, as a document store's).
	names func(body []byte, i int) bool
	// period, for a vendor that tells its changes in batches, starts the
	// burst halfway through one, where a change waits the mean time for
	// its batch (rather than wherever the previous burst left off).
	period time.Duration
}

// row is one line of the table.
type row struct {
	order         int
	system, event string
	n, missing    int
	fromChange    []time.Duration
	fromNotice    []time.Duration
	unnotified    int
	// calls says the vendor calls made from the burst's first change to
	// its last webhook, and the notifications told meanwhile.
	calls string
}

func (s scenario) run(ctx context.Context, o options, p *proxy, rc *receiver, g *testgateway.Gateway) ([]row, error) {
	pid := g.Pid()
	var rows []row
	for _, b := range s.bursts {
		type made struct {
			id string
			at time.Time
		}
		var changes []made
		var used time.Duration
		if b.period > 0 {
			now := time.Now()
			wait := b.period/2 - now.Sub(now.Truncate(b.period))
			if wait < 0 {
				wait += b.period
			}
			time.Sleep(wait)
		}
		used = cpu(pid)
		if o.trace != "" {
			traced := startTrace(g.Admin, filepath.Join(o.trace, s.system+"-"+b.event+".trace"))
			defer func() { <-traced }()
		}
		for i := range o.burst {
			at := time.Now()
			id, err := b.change(i)
			if err != nil {
				return rows, fmt.Errorf("%s change %d: %w", b.event, i, err)
			}
			changes = append(changes, made{id, at})
		}
		deadline := time.Now().Add(o.wait)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			all := true
			for _, c := range changes {
				if rc.arrived(b.event, c.id).IsZero() {
					all = false
					break
				}
			}
			if all {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		used = cpu(pid) - used
		r := row{order: b.order, system: s.label, event: b.event, n: len(changes)}
		for i, c := range changes {
			got := rc.arrived(b.event, c.id)
			if got.IsZero() {
				r.missing++
				continue
			}
			r.fromChange = append(r.fromChange, got.Sub(c.at))
			var match func([]byte) bool
			if b.names != nil {
				match = func(body []byte) bool { return b.names(body, i) }
			}
			told := p.first(s.path, c.at, match)
			if told.IsZero() || told.After(got) {
				r.unnotified++ // found by a poll, before or without its notification
				continue
			}
			r.fromNotice = append(r.fromNotice, got.Sub(told))
		}
		if len(changes) > 0 && s.calls != nil {
			start, end := changes[0].at, changes[0].at
			for _, c := range changes {
				end = later(end, rc.arrived(b.event, c.id))
			}
			r.calls = fmt.Sprintf("%s; %s (%d in the minute before); the gateway used %s of CPU (all its work, from the burst to its last webhook)",
				p.told(s.path, start, end), summary(s.calls.between(start, end), start), len(s.calls.between(start.Add(-time.Minute), start.Add(-time.Nanosecond))), fmtDur(used))
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func later(t, u time.Time) time.Time {
	if u.After(t) {
		return u
	}
	return t
}

func printTable(rows []row) {
	fmt.Println()
	fmt.Println("| system | kind | changes | from the change (p50 / p90 / max) | from the vendor's notification (p50 / p90 / p99 / max) | not notified first | missing |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %d | %s | %s | %d | %d |\n", r.system, r.event, r.n, spread(r.fromChange, false), spread(r.fromNotice, true),
			r.unnotified, r.missing)
	}
	fmt.Println()
	for _, r := range rows {
		if r.calls != "" {
			fmt.Printf("- %s %s, from its first change to its last webhook: %s\n", r.system, r.event, r.calls)
		}
	}
}

// spread is p50 / p90 (/ p99) / max of ds, "-" for none.
func spread(ds []time.Duration, p99 bool) string {
	if len(ds) == 0 {
		return "-"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	parts := []string{fmtDur(q(0.5)), fmtDur(q(0.9))}
	if p99 {
		parts = append(parts, fmtDur(q(0.99)))
	}
	parts = append(parts, fmtDur(ds[len(ds)-1]))
	return strings.Join(parts, " / ")
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}
