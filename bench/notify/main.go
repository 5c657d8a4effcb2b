// Command notify measures how long a change in a firm's real system takes
// to reach a webhook through the real binary, with every vendor double
// notifying as its vendor documents: Karbon coalescing a record's changes
// over 60 s, Intuit batching a company's changes by the minute, Xero
// sending at once, Microsoft Graph's subscriptions, Google Drive's push
// channels and Dropbox's webhooks as soon as the drive changes. For each
// system and kind it makes a burst of changes (100 by default) and prints,
// from the change and from the vendor's notification (the first one after
// the change that names it, or for a document store the first after it),
// the p50, p90, p99 and max to the webhook's arrival, with the default
// settings (polls every minute, the vendors' published allowances). A
// change that no webhook announces within the wait is counted missing.
// QuickBooks' bursts start halfway through Intuit's batching minute, where
// a change waits the mean time for its batch.
//
//	go build -o /tmp/pgw ./cmd/practicegw && go run ./bench/notify -bin /tmp/pgw
//
// -before runs a binary of a version without the document stores'
// notifications: the Caddyfile names none of their directives.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/internal/testgateway"
)

type options struct {
	bin          string
	burst        int
	karbonWindow time.Duration
	intuitPeriod time.Duration
	wait         time.Duration
	before       bool
	only         string
	trace        string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "the practicegw binary (default: build this module's)")
	flag.IntVar(&o.burst, "burst", 100, "changes in each burst")
	flag.DurationVar(&o.karbonWindow, "karbon-window", 60*time.Second, "Karbon's coalescing of a record's changes")
	flag.DurationVar(&o.intuitPeriod, "intuit-period", time.Minute, "Intuit's batching of a company's changes")
	flag.DurationVar(&o.wait, "wait", 4*time.Minute, "how long after a burst's last change its webhooks are waited for")
	flag.BoolVar(&o.before, "before", false, "the binary predates the document stores' notifications (no notification_url, app_secret)")
	flag.StringVar(&o.only, "only", "", "comma-separated systems to run (karbon,xero,quickbooks,sharepoint,google_drive,dropbox); default all")
	flag.StringVar(&o.trace, "trace", "", "a folder to write the gateway's execution trace of each burst's first 5 s to (go tool trace)")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "notify:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "pgw-notify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.bin == "" {
		if o.bin, err = testgateway.Build(dir); err != nil {
			return err
		}
	}
	proxy := newProxy()
	defer proxy.close()
	rc := newReceiver()
	defer rc.close()
	systems := chosen(o.only)
	v := startVendors(o, proxy.url(), systems)
	defer v.close()
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(v.caddyfile(o.before)), 0o644); err != nil {
		return err
	}
	g, err := testgateway.Start(testgateway.Options{Binary: o.bin, Caddyfile: caddyfile, Dir: dir,
		Env: append(v.env(), "PRACTICEGW_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8")})
	if err != nil {
		return err
	}
	defer g.Stop()
	proxy.forward(g.URL)
	fmt.Printf("practicegw %s, bursts of %d changes, Karbon coalescing %s, Intuit batching %s; load %s\n",
		o.bin, o.burst, o.karbonWindow, o.intuitPeriod, loadavg())
	if err := v.afterStart(g, rc); err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		rows []row
		wg   sync.WaitGroup
		errs []error
	)
	for _, s := range v.scenarios() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.run(ctx, o, proxy, rc, g)
			mu.Lock()
			defer mu.Unlock()
			rows = append(rows, got...)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.system, err))
			}
		}()
	}
	wg.Wait()
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].order < rows[j].order })
	printTable(rows)
	fmt.Printf("load after: %s\n", loadavg())
	for _, err := range errs {
		fmt.Fprintln(os.Stderr, "notify:", err)
	}
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "the gateway printed:\n"+tail(g.Logs(), 4000))
		return fmt.Errorf("%d scenarios failed", len(errs))
	}
	return nil
}

func chosen(only string) map[string]bool {
	all := []string{"karbon", "xero", "quickbooks", "sharepoint", "google_drive", "dropbox"}
	out := map[string]bool{}
	for _, s := range all {
		out[s] = only == ""
	}
	for _, s := range strings.Split(only, ",") {
		if s != "" {
			out[s] = true
		}
	}
	return out
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
