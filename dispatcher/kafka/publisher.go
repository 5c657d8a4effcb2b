package kafka

import (
	"context"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// newWriter is the producer both topics are written with: synchronous,
// acknowledged by every in-sync replica, keyed with the Java client's
// partitioner.
func newWriter(brokers []string, sec Security, topic string) *kafkago.Writer {
	return &kafkago.Writer{
		Addr:         kafkago.TCP(brokers...),
		Transport:    sec.transport(),
		Topic:        topic,
		Balancer:     &kafkago.Murmur2Balancer{},
		RequiredAcks: kafkago.RequireAll,
		// Callers wait for their write: a batch goes out as soon as it is
		// full or 2ms after its first message, and concurrent callers share
		// batches.
		BatchSize:    1000,
		BatchBytes:   8 << 20,
		BatchTimeout: 2 * time.Millisecond,
		// Our own loops retry for as long as it takes; a few quick tries
		// here ride out a leader election.
		MaxAttempts:     5,
		WriteBackoffMin: 50 * time.Millisecond,
		WriteBackoffMax: time.Second,
		ReadTimeout:     10 * time.Second,
		WriteTimeout:    10 * time.Second,
	}
}

// PublisherConfig tunes a Publisher.
type PublisherConfig struct {
	Brokers []string
	// Security is how the brokers want to be reached (TLS, SASL).
	Security Security
	// Topic is the changes topic. Default practicegw.changes.
	Topic string
	// Logger receives the changes that cannot be published. Default: none.
	Logger *zap.Logger
}

// Publisher writes change records to the changes topic, for the gateway
// in Kafka mode.
type Publisher struct {
	w   *kafkago.Writer
	log *zap.Logger
}

// NewPublisher makes a publisher; Close releases it.
func NewPublisher(cfg PublisherConfig) *Publisher {
	if cfg.Topic == "" {
		cfg.Topic = defaultChangesTopic
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Publisher{w: newWriter(cfg.Brokers, cfg.Security, cfg.Topic), log: cfg.Logger}
}

// Publish writes c, keyed by its resource id, and returns once every
// in-sync replica has it: only then may the gateway delete its outbox
// entry.
func (p *Publisher) Publish(ctx context.Context, c practice.Change) error {
	return p.PublishBatch(ctx, []practice.Change{c})
}

// PublishBatch writes changes in order, as Publish does; it is a
// dispatcher.Intake, so that the gateway's outbox drains to Kafka with
// dispatcher.DrainOutboxTo. A change that cannot be encoded (a record that
// is not JSON) is logged and left out: no consumer could read it.
func (p *Publisher) PublishBatch(ctx context.Context, changes []practice.Change) error {
	msgs := make([]kafkago.Message, 0, len(changes))
	for _, c := range changes {
		m, err := changeMessage(c)
		if err != nil {
			p.log.Error("dropping a change that cannot be published", zap.String("change_id", c.ID), zap.Error(err))
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d changes to %s: %w", len(msgs), p.w.Topic, err)
	}
	return nil
}

// Close flushes and releases the publisher.
func (p *Publisher) Close() error { return closeWriter(p.w) }

func closeWriter(w *kafkago.Writer) error {
	err := w.Close()
	if t, ok := w.Transport.(*kafkago.Transport); ok {
		t.CloseIdleConnections()
	}
	return err
}

var jsonHeader = kafkago.Header{Key: "content-type", Value: []byte("application/json")}

func changeMessage(c practice.Change) (kafkago.Message, error) {
	// In the records' encoding: a record's "&" must reach the event, and
	// the signed webhook body, as written, exactly as in the embedded mode.
	value, err := practice.Marshal(c)
	if err != nil {
		return kafkago.Message{}, err
	}
	return kafkago.Message{Key: []byte(changeKey(c)), Value: value, Headers: []kafkago.Header{jsonHeader}}, nil
}

// changeKey keys a change by its resource, falling back to the change id
// for a change that names none, so that it still lands somewhere stable.
func changeKey(c practice.Change) string {
	if c.ResourceID != "" {
		return c.ResourceID
	}
	return c.ID
}

func eventMessage(ev dispatcher.Event) (kafkago.Message, error) {
	value, err := ev.MarshalJSON()
	if err != nil {
		return kafkago.Message{}, err
	}
	key := ev.ResourceID
	if key == "" {
		key = ev.ID
	}
	return kafkago.Message{Key: []byte(key), Value: value, Headers: []kafkago.Header{
		jsonHeader, {Key: "event", Value: []byte(ev.Event)},
	}}, nil
}

// Interface guard: the publisher is an outbox sink.
var _ dispatcher.Intake = (*Publisher)(nil).PublishBatch
