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
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// Run is `practicegw dispatcher`: it consumes the changes topic as a
// member of the consumer group and delivers webhooks from the Redis store
// until ctx is cancelled (SIGTERM). Then it stops taking changes, finishes
// and commits the batches in hand, lets attempts in flight finish for the
// engine's shutdown grace, hands the rest back to the shared queue, and
// returns nil. Any number of dispatchers run side by side.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.Logger

	rdb, err := openRedis(ctx, cfg.Redis, cfg.RedisTLS)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := EnsureTopics(ctx, cfg.Brokers, cfg.Security, cfg.Topics, cfg.Partitions); err != nil {
		return err
	}
	store, err := redisstore.New(rdb, redisstore.Options{Secrets: cfg.Secrets})
	if err != nil {
		return err
	}
	if err := store.PrepareSecrets(ctx); err != nil {
		return fmt.Errorf("PRACTICEGW_SECRETS_KEY: %w", err)
	}
	eng, err := dispatcher.New(cfg.Engine, store.Backends())
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

	var srv *http.Server
	var serving sync.WaitGroup
	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
		}
		srv = &http.Server{Handler: probes(cfg, rdb, consumer), ReadHeaderTimeout: 5 * time.Second}
		serving.Add(1)
		go func() {
			defer serving.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics listener stopped", zap.Error(err))
			}
		}()
		defer func() {
			srv.Close()
			serving.Wait()
		}()
	}

	log.Info("dispatcher running", zap.Strings("brokers", cfg.Brokers), zap.String("group", cfg.Group),
		zap.String("changes_topic", cfg.Topics.Changes), zap.String("events_topic", cfg.Topics.Events))
	// Either half failing stops the other: a dispatcher that consumes but
	// cannot deliver, or the reverse, is better restarted.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, run := range []func(context.Context) error{consumer.Run, eng.Run} {
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
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		srv.Shutdown(sctx)
		cancel()
	}
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	log.Info("dispatcher stopped")
	return errors.Join(all...)
}

func openRedis(ctx context.Context, url string, files redisstore.TLSFiles) (*redis.Client, error) {
	rdb, err := redisstore.NewClient(url, files, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("PRACTICEGW_REDIS: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", rdb.Options().Addr, err)
	}
	return rdb, nil
}

// probes serves /metrics, /healthz (the process is alive) and /readyz (it
// reaches Redis and has joined its consumer group).
func probes(cfg Config, rdb *redis.Client, consumer *Consumer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := rdb.Ping(ctx).Err(); err != nil {
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
