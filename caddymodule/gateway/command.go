package gateway

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/sealed"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// practicegw dispatcher is registered here, beside DispatcherConfig, which
// turns the gateway's own variables into its settings: the CLI's other
// commands only talk to a gateway over HTTP and import no Caddy module.
func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "dispatcher",
		Usage: "[--listen ADDR]",
		Short: "Delivers webhooks from Kafka and Redis, sharing the work with any other dispatchers",
		Long: `
Runs webhook delivery alone, for gateways started with PRACTICEGW_DISPATCH=off.
It consumes change records from Kafka as a member of the consumer group
practicegw-dispatcher, turns them into events, and delivers them from the
delivery state in Redis. Start as many as you like: they share the topic's
partitions and the deliveries.

It reads the gateway's variables, with the gateway's defaults (one table,
internal/envconfig): PRACTICEGW_KAFKA, PRACTICEGW_REDIS and
PRACTICEGW_SECRETS_KEY (all required; rediss:// with PRACTICEGW_REDIS_TLS_CA,
_CERT and _KEY for TLS; the key is the one the gateways seal endpoint
secrets with), PRACTICEGW_WEBHOOK_BACKOFF_BASE, _BACKOFF_FACTOR,
_ALLOW_CIDRS, _BREAKER_COOLDOWN, _RETENTION, _MAX_ENDPOINTS and
_MAX_IN_FLIGHT_PER_FIRM, PRACTICEGW_KAFKA_TLS* and _SASL_*, and PRACTICEGW_KAFKA_CHANGES_TOPIC,
PRACTICEGW_KAFKA_EVENTS_TOPIC, PRACTICEGW_KAFKA_GROUP and
PRACTICEGW_KAFKA_PARTITIONS (see dispatcher/README.md). Missing topics are
created.

On SIGTERM or SIGINT it finishes and commits the changes in hand, lets
webhook requests in flight finish for 5s, hands the rest back to the shared
queue, and exits.

  PRACTICEGW_KAFKA=kafka:9092 PRACTICEGW_REDIS=redis://redis:6379/0 \
    PRACTICEGW_SECRETS_KEY=... practicegw dispatcher --listen :9180
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = cobra.NoArgs
			cmd.Flags().String("listen", "", "serve /metrics, /healthz and /readyz on this address, such as :9180")
			cmd.RunE = func(cmd *cobra.Command, _ []string) error {
				cfg, err := DispatcherConfig(os.LookupEnv)
				if err != nil {
					return err
				}
				cfg.Listen, _ = cmd.Flags().GetString("listen")
				cfg.Logger = caddy.Log().Named("dispatcher")
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return kafka.Run(ctx, cfg)
			}
		},
	})
}

// DispatcherRedis is the Redis a standalone dispatcher shares with the
// gateways; its Open is what kafka.Config opens the shared delivery state
// with. The dispatcher package declares what it needs of the store
// (kafka.Shared); the gateway, which opens every store, opens this one.
type DispatcherRedis struct {
	// URL is redis://host:port/db, or rediss:// for TLS
	// (PRACTICEGW_REDIS).
	URL string
	// TLS are the files a rediss:// connection is made with
	// (PRACTICEGW_REDIS_TLS_*).
	TLS redisstore.TLSFiles
	// Secrets is the key the gateways seal webhook endpoint secrets with
	// (PRACTICEGW_SECRETS_KEY).
	Secrets *sealed.Key
}

// Open connects to the Redis and fails unless it answers within 5s.
func (r DispatcherRedis) Open(ctx context.Context) (kafka.Shared, error) {
	rdb, err := redisstore.NewClient(r.URL, r.TLS, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("PRACTICEGW_REDIS: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", rdb.Options().Addr, err)
	}
	return &dispatcherStore{rdb: rdb, secrets: r.Secrets}, nil
}

// dispatcherStore is a dispatcher's connection to the shared Redis.
type dispatcherStore struct {
	rdb     *redisstore.Client
	secrets *sealed.Key
}

// Backends opens the store over the connection, checks the secrets key
// against the one the gateways sealed under and seals what an earlier
// version left in plain text, as every gateway does at start.
func (s *dispatcherStore) Backends(ctx context.Context) (dispatcher.Backends, error) {
	store, err := redisstore.New(s.rdb, redisstore.Options{Secrets: s.secrets})
	if err != nil {
		return dispatcher.Backends{}, err
	}
	if err := store.PrepareSecrets(ctx); err != nil {
		return dispatcher.Backends{}, fmt.Errorf("PRACTICEGW_SECRETS_KEY: %w", err)
	}
	return store.Backends(), nil
}

func (s *dispatcherStore) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

func (s *dispatcherStore) Close() error { return s.rdb.Close() }
