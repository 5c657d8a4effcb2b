package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
)

// Run is `practicegw dispatcher`: it consumes the changes topic as a
// member of the consumer group and delivers webhooks from the shared
// store (cfg.Open) until ctx is cancelled (SIGTERM). Then it stops taking
// changes, finishes and commits the batches in hand, lets attempts in
// flight finish for the engine's shutdown grace, hands the rest back to
// the shared queue, and returns nil. Any number of dispatchers run side
// by side.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.Logger

	shared, err := cfg.Open(ctx)
	if err != nil {
		return err
	}
	defer shared.Close()
	if err := EnsureTopics(ctx, cfg.Brokers, cfg.Security, cfg.Topics, cfg.Partitions); err != nil {
		return err
	}
	eng, err := openEngine(ctx, cfg, shared)
	if err != nil {
		return err
	}
	defer eng.Close()
	consumer, err := NewConsumer(ConsumerConfig{
		Brokers: cfg.Brokers, Security: cfg.Security, Group: cfg.Group, Topics: cfg.Topics, SessionTimeout: cfg.SessionTimeout,
		Logger: log.Named("consumer"), Registerer: cfg.Registerer,
	}, eng)
	if err != nil {
		return err
	}
	defer consumer.Close()
	srv, err := startProbes(cfg, shared, consumer)
	if err != nil {
		return err
	}
	defer srv.close()

	log.Info("dispatcher running", zap.Strings("brokers", cfg.Brokers), zap.String("group", cfg.Group),
		zap.String("changes_topic", cfg.Topics.Changes), zap.String("events_topic", cfg.Topics.Events))
	err = runTogether(ctx, consumer.Run, eng.Run)
	srv.shutdown(ctx)
	log.Info("dispatcher stopped")
	return err
}

// openEngine opens the webhook engine over the store every dispatcher
// and gateway shares.
func openEngine(ctx context.Context, cfg Config, shared Shared) (*dispatcher.Engine, error) {
	backends, err := shared.Backends(ctx)
	if err != nil {
		return nil, err
	}
	return dispatcher.New(cfg.Engine, backends)
}

// runTogether runs each half until ctx is done or one of them fails.
// Either half failing stops the other: a dispatcher that consumes but
// cannot deliver, or the reverse, is better restarted.
func runTogether(ctx context.Context, halves ...func(context.Context) error) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(halves))
	for _, run := range halves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(runCtx); err != nil {
				errs <- err
				stop()
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// probeServer serves probes on cfg.Listen while the dispatcher runs; nil
// when no address is configured.
type probeServer struct {
	srv     *http.Server
	serving sync.WaitGroup
	log     *zap.Logger
}

// startProbes listens before the dispatcher starts, so that an address
// it cannot have fails Run at once.
func startProbes(cfg Config, shared Shared, consumer *Consumer) (*probeServer, error) {
	if cfg.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	p := &probeServer{srv: &http.Server{Handler: probes(cfg, shared, consumer), ReadHeaderTimeout: 5 * time.Second}, log: cfg.Logger}
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("metrics listener stopped", zap.Error(err))
		}
	}()
	return p, nil
}

// shutdown lets the probe requests in hand finish, briefly: the
// dispatcher has stopped and is only saying so.
func (p *probeServer) shutdown(ctx context.Context) {
	if p == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	p.srv.Shutdown(sctx)
	cancel()
}

// close stops serving and waits for the serving goroutine, whatever way
// Run returns.
func (p *probeServer) close() {
	if p == nil {
		return
	}
	p.srv.Close()
	p.serving.Wait()
}

// probes serves /metrics, /healthz (the process is alive) and /readyz (it
// reaches the shared store, Redis, and has joined its consumer group).
func probes(cfg Config, shared Shared, consumer *Consumer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := shared.Ping(ctx); err != nil {
			// The error can name hosts and users: the log has it, the
			// probe's answer does not.
			cfg.Logger.Warn("readiness: redis does not answer", zap.Error(err))
			http.Error(w, "redis does not answer", http.StatusServiceUnavailable)
			return
		}
		if !consumer.Joined() {
			http.Error(w, "not in the kafka consumer group yet", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}
