package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/practice"
	redisstore "github.com/practicegw/practicegw/internal/store/redis"
)

// WebhookConfig tunes webhook delivery. An absent field is its
// {env.PRACTICEGW_WEBHOOK_*} placeholder, then the default.
type WebhookConfig struct {
	// BackoffBase is the delay before the first retry. Default
	// {env.PRACTICEGW_WEBHOOK_BACKOFF_BASE}, else 30s.
	BackoffBase string `json:"backoff_base,omitempty"`
	// BackoffFactor multiplies each later delay. Default
	// {env.PRACTICEGW_WEBHOOK_BACKOFF_FACTOR}, else 6 (six attempts span
	// about 13 hours).
	BackoffFactor string `json:"backoff_factor,omitempty"`
	// AllowCIDRs are exempt from the private-address block on webhook
	// URLs, comma-separated. Default {env.PRACTICEGW_WEBHOOK_ALLOW_CIDRS}.
	AllowCIDRs string `json:"allow_cidrs,omitempty"`
	// Timeout bounds one attempt. Default 15s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// BreakerCooldown is how long an endpoint's open circuit breaker
	// defers its deliveries (without spending attempts) before a probe.
	// Default {env.PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN}, else 1m.
	BreakerCooldown string `json:"breaker_cooldown,omitempty"`
	// Retention is how long events and finished deliveries stay in the
	// webhook log before they are pruned (hourly), or "off" to keep them
	// for ever. Default {env.PRACTICEGW_WEBHOOK_RETENTION}, else 720h (30
	// days).
	Retention string `json:"retention,omitempty"`
}

// engineConfig is the delivery configuration: each field as configured,
// else its {env.PRACTICEGW_WEBHOOK_*} placeholder, parsed by the same code
// as the standalone dispatcher's environment so the two cannot disagree.
func (w WebhookConfig) engineConfig(logger *zap.Logger) (dispatcher.Config, error) {
	repl := caddy.NewReplacer()
	set := map[string]string{
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE":     w.BackoffBase,
		"PRACTICEGW_WEBHOOK_BACKOFF_FACTOR":   w.BackoffFactor,
		"PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN": w.BreakerCooldown,
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS":      w.AllowCIDRs,
		"PRACTICEGW_WEBHOOK_RETENTION":        w.Retention,
	}
	cfg, err := dispatcher.EnvConfig(func(name string) string { return setting(repl, set[name], name, "") })
	cfg.Timeout, cfg.Logger = time.Duration(w.Timeout), logger
	return cfg, err
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
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func (a *App) provisionDispatch() error {
	repl := caddy.NewReplacer()
	mode := setting(repl, a.Dispatch, "PRACTICEGW_DISPATCH", "embedded")
	switch mode {
	case "embedded", "off":
	default:
		return fmt.Errorf("dispatch %q: want embedded or off", mode)
	}
	cfg, err := a.Webhooks.engineConfig(a.logger.Named("dispatcher"))
	if err != nil {
		return err
	}
	cfg.Registerer = a.metrics
	// Delivery state lives with the rest of the shared state: in Redis when
	// several processes share the work, else in the embedded store.
	if a.redis != nil {
		// Other processes queue work here too (a bulk replay made through
		// another gateway): look for it often, not only when woken.
		cfg.PollInterval = time.Second
		// A firm's bulk replays are counted across every gateway.
		cfg.ReplayBudget = redisstore.NewBudget(a.redis.client, "pgw:budget:")
	}
	engine, err := dispatcher.New(cfg, a.state.Backends())
	if err != nil {
		return fmt.Errorf("webhook engine: %w", err)
	}
	d := &dispatch{engine: engine, deliver: mode == "embedded"}

	brokers := kafka.SplitBrokers(setting(repl, a.Kafka, "PRACTICEGW_KAFKA", ""))
	if len(brokers) > 0 {
		if a.redis == nil {
			return fmt.Errorf("kafka needs redis: the processes that consume the changes topic share delivery state there")
		}
		topics := kafka.Topics{Changes: setting(repl, a.KafkaChangesTopic, "PRACTICEGW_KAFKA_CHANGES_TOPIC", ""),
			Events: setting(repl, a.KafkaEventsTopic, "PRACTICEGW_KAFKA_EVENTS_TOPIC", "")}
		sec, err := a.kafkaSecurity(repl)
		if err != nil {
			return err
		}
		d.prober = kafka.NewProber(brokers, sec, 0)
		d.publisher = kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Security: sec, Topic: topics.Changes,
			Logger: a.logger.Named("kafka")})
		if d.deliver {
			d.consumer, err = kafka.NewConsumer(kafka.ConsumerConfig{Brokers: brokers, Security: sec, Topics: topics,
				Group: setting(repl, a.KafkaGroup, "PRACTICEGW_KAFKA_GROUP", ""), Logger: a.logger.Named("kafka"), Registerer: a.metrics}, engine)
			if err != nil {
				return fmt.Errorf("kafka consumer: %w", err)
			}
		}
	}
	a.dispatch = d
	return nil
}

// publish hands change records to the event pipeline: the changes topic in
// Kafka mode, else the engine, which records them durably before it
// returns.
func (d *dispatch) publish(ctx context.Context, changes []practice.Change) error {
	if d.publisher != nil {
		return d.publisher.PublishBatch(ctx, changes)
	}
	return d.engine.IngestChanges(ctx, changes)
}

// start runs delivery and the outbox drain in this process when it
// delivers. The outbox is drained either way, so that no change waits for
// a process that never comes.
func (d *dispatch) start(outbox dispatcher.Outbox, logger *zap.Logger) {
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

// kafkaSecurity is the configured TLS and SASL, each setting falling back
// to its PRACTICEGW_KAFKA_* variable, ready to dial with.
func (a *App) kafkaSecurity(repl *caddy.Replacer) (kafka.Security, error) {
	c := a.KafkaSecurity
	sc := kafka.SecurityConfig{
		CAFile:        setting(repl, c.CAFile, "PRACTICEGW_KAFKA_TLS_CA", ""),
		CertFile:      setting(repl, c.CertFile, "PRACTICEGW_KAFKA_TLS_CERT", ""),
		KeyFile:       setting(repl, c.KeyFile, "PRACTICEGW_KAFKA_TLS_KEY", ""),
		ServerName:    setting(repl, c.ServerName, "PRACTICEGW_KAFKA_TLS_SERVER_NAME", ""),
		SASLMechanism: setting(repl, c.SASLMechanism, "PRACTICEGW_KAFKA_SASL_MECHANISM", ""),
		Username:      setting(repl, c.Username, "PRACTICEGW_KAFKA_SASL_USERNAME", ""),
		Password:      setting(repl, c.Password, "PRACTICEGW_KAFKA_SASL_PASSWORD", ""),
		TLS:           c.TLS,
	}
	if v := setting(repl, "", "PRACTICEGW_KAFKA_TLS", ""); v != "" && !sc.TLS {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return kafka.Security{}, fmt.Errorf("PRACTICEGW_KAFKA_TLS %q must be true or false", v)
		}
		sc.TLS = on
	}
	sec, err := sc.Build()
	if err != nil {
		return kafka.Security{}, fmt.Errorf("practicegw: %w", err)
	}
	return sec, nil
}
