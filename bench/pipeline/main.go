// Command pipeline measures the webhook pipeline end to end, from a change
// made through the API's write path to the webhook received, in the
// embedded mode (one bbolt file) and the Kafka mode (kfake in process, a
// real redis-server, one dispatcher), and prints for each:
//
//   - p50/p99 latency from the change to the webhook at a fixed rate;
//   - sustained deliveries per second working off a backlog;
//   - the healthy endpoint's p50/p99 beside one that never answers.
//
// The change is made the way POST /v1/clients makes it: the demo adapter's
// CreateClient, which stores the record and its outbox entry in one bbolt
// transaction; the HTTP layer in front of it (auth, rate limit, JSON) is
// not included. The backlog is synthetic changes (an in-memory outbox, or
// published straight to the changes topic), so that it measures delivery
// alone. Run it through bench/pipeline.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	var (
		modes    = flag.String("mode", "embedded,kafka", "modes to measure: embedded, kafka or both, comma-separated")
		rate     = flag.Int("rate", 1000, "changes per second in the fixed-rate runs")
		duration = flag.Duration("duration", 10*time.Second, "length of the fixed-rate runs")
		backlog  = flag.Int("backlog", 30000, "changes in the saturation run")
		redisURL = flag.String("redis", "", "an existing Redis to use (flushed!); default: start a redis-server")
		cpuprof  = flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
		only     = flag.String("runs", "fixed,saturation,dead", "runs to make, comma-separated")
	)
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	fmt.Printf("pipeline benchmark: %d CPUs, GOMAXPROCS %d, %s\n\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Printf("%-9s %-36s %7s %9s %9s %9s %12s\n", "mode", "run", "events", "p50", "p99", "max", "rate")
	for _, mode := range strings.Split(*modes, ",") {
		var open opener
		switch strings.TrimSpace(mode) {
		case "embedded":
			open = openEmbedded
		case "kafka":
			infra, err := startKafkaInfra(*redisURL)
			if err != nil {
				fail(err)
			}
			defer infra.close()
			open = infra.open
		default:
			fail(fmt.Errorf("unknown mode %q", mode))
		}
		runs := []struct {
			key, name string
			fn        func(context.Context, opener) (result, error)
		}{
			{"fixed", fmt.Sprintf("%d/s for %s", *rate, *duration), func(ctx context.Context, o opener) (result, error) {
				return fixedRate(ctx, o, *rate, *duration, false)
			}},
			{"saturation", fmt.Sprintf("saturation, %d backlog", *backlog), func(ctx context.Context, o opener) (result, error) {
				return saturation(ctx, o, *backlog)
			}},
			{"dead", fmt.Sprintf("healthy beside dead, %d/s", *rate), func(ctx context.Context, o opener) (result, error) {
				return fixedRate(ctx, o, *rate, *duration, true)
			}},
		}
		for _, r := range runs {
			if !slices.Contains(strings.Split(*only, ","), r.key) {
				continue
			}
			res, err := r.fn(ctx, open)
			if err != nil {
				fail(fmt.Errorf("%s %s: %w", mode, r.name, err))
			}
			res.print(mode, r.name)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pipeline:", err)
	os.Exit(1)
}
