package gateway

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/dispatcher/kafka"
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
