package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
)

// Defaults, as docs/CONTRACT.md and dispatcher/README.md document them.
const (
	defaultChangesTopic = "practicegw.changes"
	defaultEventsTopic  = "practicegw.events"
	DefaultGroup        = "practicegw-dispatcher"
	DefaultPartitions   = 6
)

// Topics names the two topics.
type Topics struct {
	// Changes carries change records. Default practicegw.changes.
	Changes string
	// Events carries the events derived from them. Default
	// practicegw.events.
	Events string
}

func (t Topics) withDefaults() Topics {
	if t.Changes == "" {
		t.Changes = defaultChangesTopic
	}
	if t.Events == "" {
		t.Events = defaultEventsTopic
	}
	return t
}

// Shared is the delivery state the dispatchers share with the gateways
// (the Redis store in production), once Config.Open has reached it.
type Shared interface {
	// Backends readies the store (a secrets key check, what is left to
	// seal) and gives the engine's backends over it. Run asks for them
	// only once Kafka has answered and the topics exist, so that a
	// dispatcher that cannot reach Kafka changes nothing in the store.
	Backends(ctx context.Context) (dispatcher.Backends, error)
	// Ping says whether the store answers, for /readyz.
	Ping(ctx context.Context) error
	// Close lets go of the connection; Run calls it last.
	Close() error
}

// Config is what `practicegw dispatcher` runs with: the practicegw app's
// settings it shares with the gateways, which the gateway package reads
// from the environment's table (internal/envconfig) for it.
type Config struct {
	// Brokers are Kafka bootstrap addresses (PRACTICEGW_KAFKA). Required.
	Brokers []string
	// Security is how the brokers want to be reached: TLS and SASL
	// (PRACTICEGW_KAFKA_TLS*, PRACTICEGW_KAFKA_SASL_*).
	Security Security
	// Open reaches the shared delivery state, failing when it does not
	// answer: Run calls it first, before it asks anything of Kafka. The
	// gateway package opens the Redis store of PRACTICEGW_REDIS with the
	// key of PRACTICEGW_SECRETS_KEY. Required.
	Open func(ctx context.Context) (Shared, error)
	// Topics name the topics (PRACTICEGW_KAFKA_CHANGES_TOPIC,
	// PRACTICEGW_KAFKA_EVENTS_TOPIC).
	Topics Topics
	// Group is the consumer group (PRACTICEGW_KAFKA_GROUP). Default
	// practicegw-dispatcher.
	Group string
	// Partitions is how many partitions a topic gets when the dispatcher
	// creates it (PRACTICEGW_KAFKA_PARTITIONS): the most dispatchers that
	// can share the consuming. Default 6. Existing topics are left alone.
	Partitions int
	// SessionTimeout is how long the group waits for a dispatcher that
	// went silent (killed, partitioned) before its partitions go to the
	// others. Default 10s.
	SessionTimeout time.Duration
	// Engine tunes delivery (PRACTICEGW_WEBHOOK_*).
	Engine dispatcher.Config
	// Listen, if set, serves /metrics, /healthz and /readyz there.
	Listen string
	// Logger receives operational logs. Default: none.
	Logger *zap.Logger
	// Registerer and Gatherer are the metrics registry. Default
	// Prometheus's default registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// SplitBrokers reads PRACTICEGW_KAFKA's comma-separated brokers.
func SplitBrokers(s string) []string {
	var out []string
	for b := range strings.SplitSeq(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

func (c Config) withDefaults() (Config, error) {
	// What an operator lacks the gateway package says first, naming the
	// variables (DispatcherConfig); these are a caller's mistakes.
	if len(c.Brokers) == 0 {
		return c, errors.New("kafka: no brokers (Config.Brokers)")
	}
	if c.Open == nil {
		return c, errors.New("kafka: nothing opens the shared delivery state (Config.Open)")
	}
	c.Topics = c.Topics.withDefaults()
	if c.Topics.Changes == c.Topics.Events {
		return c, fmt.Errorf("the changes and events topics are both %q; they must differ", c.Topics.Changes)
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.DefaultRegisterer
	}
	if c.Gatherer == nil {
		c.Gatherer = prometheus.DefaultGatherer
	}
	if c.Engine.Logger == nil {
		c.Engine.Logger = c.Logger
	}
	if c.Engine.Registerer == nil {
		c.Engine.Registerer = c.Registerer
	}
	if c.Engine.PollInterval == 0 {
		// Another dispatcher may have queued what this one could send:
		// look at the shared queue at least this often.
		c.Engine.PollInterval = time.Second
	}
	return c, nil
}
