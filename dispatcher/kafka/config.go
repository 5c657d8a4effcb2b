package kafka

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	redisstore "github.com/practicegw/practicegw/store/redis"
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

// Config is what `practicegw dispatcher` runs with: the practicegw app's
// settings it shares with the gateways, which the gateway package reads
// from the environment's table (internal/envconfig) for it.
type Config struct {
	// Brokers are Kafka bootstrap addresses (PRACTICEGW_KAFKA). Required.
	Brokers []string
	// Security is how the brokers want to be reached: TLS and SASL
	// (PRACTICEGW_KAFKA_TLS*, PRACTICEGW_KAFKA_SASL_*).
	Security Security
	// Redis is the shared store's URL, redis://host:port/db or rediss://
	// for TLS (PRACTICEGW_REDIS). Required.
	Redis string
	// RedisTLS are the files a rediss:// connection is made with
	// (PRACTICEGW_REDIS_TLS_*).
	RedisTLS redisstore.TLSFiles
	// Secrets is the key the gateways seal webhook endpoint secrets with
	// in Redis (PRACTICEGW_SECRETS_KEY). Required.
	Secrets *sealed.Key
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
	if len(c.Brokers) == 0 {
		return c, errors.New("practicegw dispatcher needs Kafka: set PRACTICEGW_KAFKA to the brokers, host:port[,host:port...]")
	}
	if c.Redis == "" {
		return c, errors.New("practicegw dispatcher needs Redis for delivery state shared with the gateways: set PRACTICEGW_REDIS to redis://host:port/db")
	}
	if c.Secrets == nil {
		return c, errors.New("practicegw dispatcher needs the key the gateways seal webhook endpoint secrets with: set PRACTICEGW_SECRETS_KEY as the gateways have it")
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
