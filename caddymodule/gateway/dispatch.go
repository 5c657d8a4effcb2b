package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/demo"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/envconfig"
	"github.com/practicegw/practicegw/practice/changes"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// WebhookConfig tunes webhook delivery. A field left out takes its
// variable's value, else its default, from the environment's table
// (internal/envconfig) before the app is provisioned; the defaults below
// are the table's.
type WebhookConfig struct {
	// BackoffBase is the delay before the first retry. Default 30s
	// (PRACTICEGW_WEBHOOK_BACKOFF_BASE).
	BackoffBase caddy.Duration `json:"backoff_base,omitempty"`
	// BackoffFactor multiplies each later delay, a number of at least 1.
	// Default 6, so six attempts span about 13 hours
	// (PRACTICEGW_WEBHOOK_BACKOFF_FACTOR).
	BackoffFactor string `json:"backoff_factor,omitempty"`
	// AllowCIDRs are exempt from the private-address block on webhook
	// URLs, comma-separated (PRACTICEGW_WEBHOOK_ALLOW_CIDRS).
	AllowCIDRs string `json:"allow_cidrs,omitempty"`
	// Timeout bounds one attempt. Default 15s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// BreakerCooldown is how long an endpoint's open circuit breaker
	// defers its deliveries (without spending attempts) before a probe.
	// Default 1m (PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN).
	BreakerCooldown caddy.Duration `json:"breaker_cooldown,omitempty"`
	// Retention is how long events and finished deliveries stay in the
	// webhook log before they are pruned (hourly), or "off" to keep them
	// for ever. Default 720h, 30 days (PRACTICEGW_WEBHOOK_RETENTION).
	Retention string `json:"retention,omitempty"`
	// MaxEndpoints is how many webhook endpoints one firm may register in
	// each mode. Default 50 (PRACTICEGW_WEBHOOK_MAX_ENDPOINTS).
	MaxEndpoints int `json:"max_endpoints,omitempty"`
	// MaxInFlightPerFirm bounds the webhook requests one firm's endpoints
	// have in flight at once, per delivering process. Default 64
	// (PRACTICEGW_WEBHOOK_MAX_IN_FLIGHT_PER_FIRM).
	MaxInFlightPerFirm int `json:"max_in_flight_per_firm,omitempty"`
}

// engineConfig is the delivery configuration, placeholders expanded; the
// standalone dispatcher's comes from the same code (DispatcherConfig).
func (w WebhookConfig) engineConfig(logger *zap.Logger) (dispatcher.Config, error) {
	repl := caddy.NewReplacer()
	cfg := dispatcher.Config{
		BackoffBase:        time.Duration(w.BackoffBase),
		BreakerCooldown:    time.Duration(w.BreakerCooldown),
		Timeout:            time.Duration(w.Timeout),
		MaxEndpoints:       w.MaxEndpoints,
		MaxInFlightPerFirm: w.MaxInFlightPerFirm,
		Logger:             logger,
	}
	for name, d := range map[string]time.Duration{"backoff_base": cfg.BackoffBase, "breaker_cooldown": cfg.BreakerCooldown, "timeout": cfg.Timeout} {
		if d < 0 {
			return cfg, fmt.Errorf("webhooks %s %s is negative", name, d)
		}
	}
	if cfg.MaxEndpoints < 0 || cfg.MaxInFlightPerFirm < 0 {
		return cfg, fmt.Errorf("webhooks max_endpoints and max_in_flight_per_firm must be positive")
	}
	if f := strings.TrimSpace(repl.ReplaceAll(w.BackoffFactor, "")); f != "" {
		n, err := strconv.ParseFloat(f, 64)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("webhooks backoff_factor %q must be a number of at least 1", f)
		}
		cfg.BackoffFactor = n
	}
	if r := strings.TrimSpace(repl.ReplaceAll(w.Retention, "")); r != "" {
		d, err := dispatcher.ParseRetention(r)
		if err != nil {
			return cfg, fmt.Errorf("webhooks retention: %w", err)
		}
		cfg.Retention = d
	}
	cidrs, err := dispatcher.ParseCIDRs(repl.ReplaceAll(w.AllowCIDRs, ""))
	if err != nil {
		return cfg, fmt.Errorf("webhooks allow_cidrs: %w", err)
	}
	cfg.AllowCIDRs = cidrs
	return cfg, nil
}

// dispatch owns the webhook engine of one app instance and, when this
// process delivers, its background loops.
type dispatch struct {
	engine  *dispatcher.Engine
	deliver bool
	// publisher is set in Kafka mode: change records go to the changes
	// topic rather than straight into the engine.
	publisher *kafka.Publisher
	// prober tells readiness whether the cluster answers, in Kafka mode.
	prober *kafka.Prober
	// consumer is set in Kafka mode when this process also delivers: it
	// takes its share of the changes topic as one member of the
	// dispatchers' consumer group.
	consumer *kafka.Consumer
	// intake is set when the webhook state is the embedded store: the demo
	// records hand it their changes in the transaction that writes them
	// (dispatcher.TxIntake), rather than to the outbox.
	intake  demo.ChangeLog
	restore func()
	// publish takes the firms' systems' change records and the outbox's:
	// the publisher's in Kafka mode, else the engine's.
	publish dispatcher.Intake
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// newDispatch makes the webhook engine of a's configuration over its
// stores, and in Kafka mode the changes topic's publisher and consumer.
func newDispatch(a *App, reg prometheus.Registerer) (*dispatch, error) {
	repl := caddy.NewReplacer()
	mode := expand(repl, a.Dispatch)
	switch mode {
	case "embedded", "off":
	default:
		return nil, fmt.Errorf("dispatch %q: want embedded or off", mode)
	}
	cfg, err := a.Webhooks.engineConfig(a.logger.Named("dispatcher"))
	if err != nil {
		return nil, err
	}
	cfg.Registerer = reg
	redis := a.stores.redis
	// Delivery state lives with the rest of the shared state: in Redis when
	// several processes share the work, else in the embedded store.
	if redis != nil {
		// Other processes queue work here too (a bulk replay made through
		// another gateway): look for it often, not only when woken.
		cfg.PollInterval = time.Second
		// A firm's bulk replays are counted across every gateway.
		cfg.ReplayBudget = redisstore.NewBudget(redis.client, "pgw:budget:")
	}
	engine, err := dispatcher.New(cfg, a.stores.gateway.Backends())
	if err != nil {
		return nil, fmt.Errorf("webhook engine: %w", err)
	}
	d := &dispatch{engine: engine, deliver: mode == "embedded", publish: engine.IngestChanges}

	brokers := kafka.SplitBrokers(expand(repl, a.Kafka))
	if redis == nil && len(brokers) == 0 {
		d.intake = a.stores.shared.store.TxIntake(engine)
	}
	if len(brokers) > 0 {
		if a.Redis == "" {
			return nil, fmt.Errorf("kafka needs redis: the processes that consume the changes topic share delivery state there")
		}
		topics := kafkaTopics(repl, a)
		sec, err := kafkaSecurity(repl, a.KafkaSecurity)
		if err != nil || a.CheckOnly {
			// A configuration only checked reaches no broker.
			return d, err
		}
		d.prober = kafka.NewProber(brokers, sec, 0)
		d.publisher = kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Security: sec, Topic: topics.Changes,
			Logger: a.logger.Named("kafka")})
		d.publish = d.publisher.PublishBatch
		if d.deliver {
			d.consumer, err = kafka.NewConsumer(kafka.ConsumerConfig{Brokers: brokers, Security: sec, Topics: topics,
				Group: expand(repl, a.KafkaGroup), Logger: a.logger.Named("kafka"), Registerer: reg}, engine)
			if err != nil {
				return nil, fmt.Errorf("kafka consumer: %w", err)
			}
		}
	}
	return d, nil
}

// sink is where change records go, as the outbox's do: the changes topic
// in Kafka mode, else the engine, which records them durably before it
// returns. The firms' systems publish into it directly.
func (d *dispatch) sink() changes.ChangeSink { return d.publish }

// start runs delivery and the outbox drain in this process when it
// delivers. The outbox is drained either way, so that no change waits for
// a process that never comes (with the intake, what a previous version or
// a stopped app left there).
func (d *dispatch) start(outbox *demo.Records, logger *zap.Logger) {
	if d.intake != nil {
		d.restore = outbox.SetChangeLog(d.intake)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := dispatcher.DrainOutboxTo(ctx, outbox, d.publish, logger.Named("outbox")); err != nil {
			logger.Error("outbox drain stopped", zap.Error(err))
		}
	}()
	if d.prober != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.prober.Run(ctx)
		}()
	}
	if d.consumer != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.consumer.Run(ctx); err != nil {
				logger.Error("changes consumer stopped", zap.Error(err))
			}
		}()
	}
	if d.deliver {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.engine.Run(ctx); err != nil {
				logger.Error("webhook delivery stopped", zap.Error(err))
			}
		}()
	}
}

func (d *dispatch) stop() error {
	if d.restore != nil {
		d.restore()
	}
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	var errs []error
	if d.consumer != nil {
		errs = append(errs, d.consumer.Close())
	}
	if d.publisher != nil {
		errs = append(errs, d.publisher.Close())
	}
	return errors.Join(append(errs, d.engine.Close())...)
}

// WebhookEngine is the webhook engine the API's event and webhook routes and
// the console's webhook pages use.
func (a *App) WebhookEngine() *dispatcher.Engine { return a.dispatch.engine }

// kafkaTopics are the configured topics, placeholders expanded.
func kafkaTopics(repl *caddy.Replacer, a *App) kafka.Topics {
	return kafka.Topics{Changes: expand(repl, a.KafkaChangesTopic), Events: expand(repl, a.KafkaEventsTopic)}
}

// kafkaSecurity is the configured TLS and SASL, placeholders expanded,
// ready to dial with.
func kafkaSecurity(repl *caddy.Replacer, c kafka.SecurityConfig) (kafka.Security, error) {
	sc := kafka.SecurityConfig{
		TLS:           c.TLS,
		CAFile:        expand(repl, c.CAFile),
		CertFile:      expand(repl, c.CertFile),
		KeyFile:       expand(repl, c.KeyFile),
		ServerName:    expand(repl, c.ServerName),
		SASLMechanism: expand(repl, c.SASLMechanism),
		Username:      expand(repl, c.Username),
		// A password may end in spaces; take it as it is.
		Password: repl.ReplaceAll(c.Password, ""),
	}
	sec, err := sc.Build()
	if err != nil {
		return kafka.Security{}, err
	}
	return sec, nil
}

// DispatcherConfig is what practicegw dispatcher runs with: the settings
// it shares with the gateways, each from its variable or default through
// the same table (internal/envconfig) and turned into delivery and Kafka
// settings by the same code as a gateway's, so the two cannot disagree.
func DispatcherConfig(lookup envconfig.Lookup) (kafka.Config, error) {
	raw, err := envconfig.Apply(nil, lookup)
	if err != nil {
		return kafka.Config{}, err
	}
	var a App
	if err := json.Unmarshal(raw, &a); err != nil {
		return kafka.Config{}, err
	}
	repl := caddy.NewReplacer()
	eng, err := a.Webhooks.engineConfig(nil)
	if err != nil {
		return kafka.Config{}, err
	}
	sec, err := kafkaSecurity(repl, a.KafkaSecurity)
	if err != nil {
		return kafka.Config{}, err
	}
	shared := DispatcherRedis{URL: expand(repl, a.Redis), TLS: expandTLS(repl, a.RedisTLS)}
	if shared.Secrets, err = configuredSecretsKey(repl, a.SecretsKey); err != nil {
		return kafka.Config{}, fmt.Errorf("PRACTICEGW_SECRETS_KEY: %w", err)
	}
	cfg := kafka.Config{
		Brokers:    kafka.SplitBrokers(expand(repl, a.Kafka)),
		Security:   sec,
		Open:       shared.Open,
		Topics:     kafkaTopics(repl, &a),
		Group:      expand(repl, a.KafkaGroup),
		Partitions: a.KafkaPartitions,
		Engine:     eng,
	}
	if err := dispatcherNeeds(cfg.Brokers, shared); err != nil {
		return kafka.Config{}, err
	}
	return cfg, nil
}

// dispatcherNeeds says what of the required variables is missing, one at
// a time, Kafka first; kafka.Run then checks the rest of its settings.
func dispatcherNeeds(brokers []string, shared DispatcherRedis) error {
	switch {
	case len(brokers) == 0:
		return errors.New("practicegw dispatcher needs Kafka: set PRACTICEGW_KAFKA to the brokers, host:port[,host:port...]")
	case shared.URL == "":
		return errors.New("practicegw dispatcher needs Redis for delivery state shared with the gateways: set PRACTICEGW_REDIS to redis://host:port/db")
	case shared.Secrets == nil:
		return errors.New("practicegw dispatcher needs the key the gateways seal webhook endpoint secrets with: set PRACTICEGW_SECRETS_KEY as the gateways have it")
	}
	return nil
}

// expand is a configured value with its placeholders expanded.
func expand(repl *caddy.Replacer, value string) string {
	return strings.TrimSpace(repl.ReplaceAll(value, ""))
}

// expandTLS is the Redis TLS files, placeholders expanded.
func expandTLS(repl *caddy.Replacer, f redisstore.TLSFiles) redisstore.TLSFiles {
	return redisstore.TLSFiles{CA: expand(repl, f.CA), Cert: expand(repl, f.Cert), Key: expand(repl, f.Key)}
}
