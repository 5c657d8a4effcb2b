// Command pipeline measures the webhook pipeline end to end through the
// real binary and its HTTP API, in the embedded mode (one practicegw
// process on its bbolt file) and the Kafka mode (a gateway with
// PRACTICEGW_DISPATCH=off and one `practicegw dispatcher`, kfake in this
// process as three brokers, a real redis-server), and prints for each:
//
//   - change -> webhook p50/p99 at a fixed rate, each change a real
//     POST /v1/jobs/{id}/stage, timed from the moment its answer came back
//     to the moment its signed webhook arrived (and, beside, the API call
//     itself);
//   - deliveries per second working off a backlog submitted through the API
//     by concurrent clients, from the first call to the last webhook;
//   - a healthy endpoint's p50/p99 beside an endpoint that never answers;
//   - CPU (user + system, every process of the mode) per delivery and the
//     peak resident memory;
//
// beside the machine's own floor measured in the same run: a bbolt commit
// with fsync in the data directory's file system, and a loopback HTTP
// round trip through the same kind of client. The load average at each
// run's start and end is printed with it: on a shared machine, read the
// figures against the floor of the same run. Run it through
// bench/pipeline.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

type options struct {
	bin         string
	rate        int
	duration    time.Duration
	backlog     int
	concurrency int
	redisURL    string
}

func main() {
	var o options
	modes := flag.String("mode", "embedded,kafka", "modes to measure: embedded, kafka or both, comma-separated")
	runs := flag.String("runs", "fixed,backlog,dead", "runs to make, comma-separated")
	flag.StringVar(&o.bin, "bin", "", "the practicegw binary to measure (bench/pipeline.sh builds one)")
	flag.IntVar(&o.rate, "rate", 200, "changes per second in the fixed-rate runs")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "length of the fixed-rate runs")
	flag.IntVar(&o.backlog, "backlog", 20000, "changes in the backlog run")
	flag.IntVar(&o.concurrency, "concurrency", 32, "API clients submitting the backlog")
	flag.StringVar(&o.redisURL, "redis", "", "an existing Redis for the Kafka mode (flushed!); default: start a redis-server")
	flag.Parse()
	if o.bin == "" {
		fail(fmt.Errorf("-bin is required"))
	}
	binPath = o.bin
	ctx := context.Background()
	fmt.Printf("pipeline benchmark: %s, %d CPUs, %s; rate %d/s for %s, backlog %d from %d clients\n",
		o.bin, runtime.NumCPU(), runtime.Version(), o.rate, o.duration, o.backlog, o.concurrency)
	fl, err := measureFloor(ctx)
	if err != nil {
		fail(fmt.Errorf("floor: %w", err))
	}
	fmt.Printf("floor (load %s): bbolt commit with fsync p50 %s p99 %s; loopback HTTP round trip p50 %s p99 %s\n\n",
		loadavg(), fmtDur(fl.commit.p50), fmtDur(fl.commit.p99), fmtDur(fl.http.p50), fmtDur(fl.http.p99))
	fmt.Printf("%-9s %-28s %9s %9s %9s %9s %11s %8s %8s  %s\n", "mode", "run", "p50", "p99", "api p50", "api p99",
		"rate", "CPU/dlv", "peak", "load at start -> end")
	for _, mode := range strings.Split(*modes, ",") {
		mode = strings.TrimSpace(mode)
		if mode != "embedded" && mode != "kafka" {
			fail(fmt.Errorf("unknown mode %q", mode))
		}
		var infra *kafkaInfra
		if mode == "kafka" {
			if infra, err = startKafkaInfra(o.redisURL); err != nil {
				fail(err)
			}
		}
		for _, r := range []struct{ key, name string }{
			{"fixed", fmt.Sprintf("%d/s for %s", o.rate, o.duration)},
			{"backlog", fmt.Sprintf("backlog of %d, %d clients", o.backlog, o.concurrency)},
			{"dead", fmt.Sprintf("healthy beside dead, %d/s", o.rate)},
		} {
			if !slices.Contains(strings.Split(*runs, ","), r.key) {
				continue
			}
			res, err := measure(ctx, o, mode, infra, r.key)
			if err != nil {
				fail(fmt.Errorf("%s %s: %w", mode, r.name, err))
			}
			res.print(mode, r.name, fl)
		}
		if infra != nil {
			infra.close()
		}
	}
}

// measure starts the mode's processes afresh and makes one run.
func measure(ctx context.Context, o options, mode string, infra *kafkaInfra, run string) (result, error) {
	sys, err := startSystem(ctx, o.bin, mode, infra)
	if err != nil {
		return result{}, err
	}
	defer sys.close()
	l := &load{sys: sys}
	switch run {
	case "fixed":
		return l.fixedRate(ctx, o.rate, o.duration, false)
	case "dead":
		return l.fixedRate(ctx, o.rate, o.duration, true)
	}
	return l.backlog(ctx, o.backlog, o.concurrency)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pipeline:", err)
	os.Exit(1)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
