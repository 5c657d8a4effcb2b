package kafka

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// EnsureTopics creates the topics that do not exist yet, with partitions
// partitions each, replicated three times or on every broker if there are
// fewer. Topics that exist are left as they are.
func EnsureTopics(ctx context.Context, brokers []string, sec Security, topics Topics, partitions int) error {
	topics = topics.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := dialAny(ctx, brokers, sec)
	if err != nil {
		return err
	}
	defer conn.Close()
	all, err := conn.Brokers()
	if err != nil {
		return fmt.Errorf("kafka: listing brokers: %w", err)
	}
	ctrl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("kafka: finding the controller: %w", err)
	}
	cc, err := sec.dialer().DialContext(ctx, "tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		return fmt.Errorf("kafka: dialling the controller: %w", err)
	}
	defer cc.Close()
	if dl, ok := ctx.Deadline(); ok {
		cc.SetDeadline(dl)
	}
	var configs []kafkago.TopicConfig
	for _, name := range []string{topics.Changes, topics.Events} {
		configs = append(configs, kafkago.TopicConfig{
			Topic: name, NumPartitions: partitions, ReplicationFactor: min(3, len(all)),
		})
	}
	// An existing topic is not an error here; kafka-go skips it.
	if err := cc.CreateTopics(configs...); err != nil {
		return fmt.Errorf("kafka: creating topics %s and %s: %w", topics.Changes, topics.Events, err)
	}
	// A new topic takes a moment to reach every broker's metadata; until
	// it has, producers are told it does not exist.
	for _, name := range []string{topics.Changes, topics.Events} {
		for {
			parts, err := conn.ReadPartitions(name)
			if err == nil && len(parts) > 0 && parts[0].Leader.Host != "" {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafka: topic %s did not appear: %w", name, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func dialAny(ctx context.Context, brokers []string, sec Security) (*kafkago.Conn, error) {
	d := sec.dialer()
	var last error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		last = err
	}
	return nil, fmt.Errorf("kafka: no broker of %v answers: %w", brokers, last)
}
