package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Prober tells readiness probes whether the cluster answers. It keeps one
// connection and asks it for the broker list every interval, so a probe
// reads the last answer instead of dialling the brokers itself: probing
// often costs the cluster nothing, and a probe never waits on Kafka.
type Prober struct {
	brokers  []string
	sec      Security
	interval time.Duration

	conn *kafkago.Conn // owned by Run

	mu  sync.Mutex
	ok  bool
	err error
}

// NewProber probes brokers every interval (default 10s); Run drives it.
func NewProber(brokers []string, sec Security, interval time.Duration) *Prober {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	return &Prober{brokers: brokers, sec: sec, interval: interval, err: fmt.Errorf("kafka: not checked yet")}
}

// Run checks at once and then every interval until ctx ends, and closes
// the connection.
func (p *Prober) Run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	defer p.close()
	for {
		p.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check asks the cluster for its brokers over the kept connection,
// dialling only when there is none (at first, or after a failure).
func (p *Prober) Check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := func() error {
		if p.conn == nil {
			conn, err := dialAny(ctx, p.brokers, p.sec)
			if err != nil {
				return err
			}
			p.conn = conn
		}
		if dl, ok := ctx.Deadline(); ok {
			p.conn.SetDeadline(dl)
		}
		if _, err := p.conn.Brokers(); err != nil {
			p.close()
			return fmt.Errorf("kafka: listing brokers: %w", err)
		}
		return nil
	}()
	p.mu.Lock()
	p.ok, p.err = err == nil, err
	p.mu.Unlock()
}

// Ready reports the last check: whether the cluster answered, and why not.
func (p *Prober) Ready() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.err
}

func (p *Prober) close() {
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
}
