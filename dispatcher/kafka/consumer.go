package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
)

// Ingester records events and queues their deliveries durably:
// dispatcher.Engine.
type Ingester interface {
	IngestEvents(ctx context.Context, events []dispatcher.Event) error
}

// ConsumerConfig tunes a Consumer. Zero values take the defaults given.
type ConsumerConfig struct {
	Brokers []string
	// Security is how the brokers want to be reached (TLS, SASL).
	Security Security
	// Group is the consumer group. Default practicegw-dispatcher.
	Group  string
	Topics Topics
	// MaxBatch bounds the changes of one partition handled, and committed,
	// together. Default 256.
	MaxBatch int
	// DrainTimeout bounds how long a revoked or stopping partition may
	// take to finish its batch; a batch that cannot finish in time is not
	// committed, and is handled again by the partition's next owner.
	// Default 10s, well inside the group's rebalance timeout.
	DrainTimeout time.Duration
	// SessionTimeout is how long the group waits for a silent member
	// before giving its partitions to others. Default 10s.
	SessionTimeout time.Duration
	Logger         *zap.Logger
	Registerer     prometheus.Registerer
}

func (c ConsumerConfig) withDefaults() ConsumerConfig {
	c.Topics = c.Topics.withDefaults()
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.DefaultRegisterer
	}
	return c
}

// Consumer consumes the changes topic as a member of the consumer group and
// hands each change's events to the events topic and the Ingester.
type Consumer struct {
	cfg     ConsumerConfig
	ing     Ingester
	events  *kafkago.Writer
	log     *zap.Logger
	metrics *consumerMetrics
	joined  atomic.Bool

	lagMu sync.Mutex
	lag   map[int]int64 // partition -> messages behind, for partitions held
}

// NewConsumer makes a consumer; Run runs it, Close releases it.
func NewConsumer(cfg ConsumerConfig, ing Ingester) (*Consumer, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka consumer: no brokers")
	}
	return &Consumer{
		cfg:     cfg,
		ing:     ing,
		events:  newWriter(cfg.Brokers, cfg.Security, cfg.Topics.Events),
		log:     cfg.Logger,
		metrics: newConsumerMetrics(cfg.Registerer),
		lag:     make(map[int]int64),
	}, nil
}

// Joined reports whether the consumer has joined its group, for a
// readiness probe.
func (c *Consumer) Joined() bool { return c.joined.Load() }

// Run consumes until ctx is cancelled, then finishes the batches in hand,
// commits them, leaves the group and returns nil.
func (c *Consumer) Run(ctx context.Context) error {
	group, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID:      c.cfg.Group,
		Brokers: c.cfg.Brokers,
		Dialer:  c.cfg.Security.dialer(),
		Topics:  []string{c.cfg.Topics.Changes},
		// A new group reads the topic from its start: nothing published
		// before the first dispatcher came up is lost.
		StartOffset:           kafkago.FirstOffset,
		SessionTimeout:        c.cfg.SessionTimeout,
		HeartbeatInterval:     c.cfg.SessionTimeout / 5,
		RebalanceTimeout:      c.cfg.DrainTimeout + 20*time.Second,
		WatchPartitionChanges: true,
		Timeout:               10 * time.Second,
		ErrorLogger:           kafkaLogger(c.log.Named("group")),
	})
	if err != nil {
		return fmt.Errorf("kafka consumer group %s: %w", c.cfg.Group, err)
	}
	// Close ends the current generation, waits for its partition
	// goroutines to drain and commit, and leaves the group.
	defer group.Close()
	for {
		gen, err := group.Next(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// Joining failed (no coordinator yet, a rebalance); the group
			// backs off before it tries again.
			c.log.Warn("joining the kafka consumer group failed; retrying", zap.String("group", c.cfg.Group), zap.Error(err))
			continue
		}
		c.joined.Store(true)
		parts := gen.Assignments[c.cfg.Topics.Changes]
		c.log.Info("kafka consumer group generation", zap.Int32("generation", gen.ID), zap.Int("partitions", len(parts)))
		cm := newCommitter(gen, c.cfg.Topics.Changes, c.log)
		for _, p := range parts {
			cm.parts.Add(1)
			gen.Start(func(gctx context.Context) {
				defer cm.parts.Done()
				c.consume(gctx, cm, p)
			})
		}
		gen.Start(cm.run)
	}
}

// Close releases the events producer. Call it after Run has returned.
func (c *Consumer) Close() error { return closeWriter(c.events) }

func (c *Consumer) setLag(partition int, lag int64, held bool) {
	c.lagMu.Lock()
	defer c.lagMu.Unlock()
	if held {
		c.lag[partition] = max(lag, 0)
	} else {
		delete(c.lag, partition)
	}
	var sum int64
	for _, n := range c.lag {
		sum += n
	}
	c.metrics.lag.WithLabelValues(c.cfg.Topics.Changes).Set(float64(sum))
}
