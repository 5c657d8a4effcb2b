package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// fetchAhead is how many fetched changes wait while a batch is handled.
const fetchAhead = 1024

// consume handles one partition for one generation: the goroutine the
// style guide asks for. It returns when the generation ends (after
// finishing the batch in hand) or when something it cannot get past
// happens, which ends the generation so that the group starts afresh.
func (c *Consumer) consume(gctx context.Context, cm *committer, a kafkago.PartitionAssignment) {
	log := c.log.With(zap.String("topic", c.cfg.Topics.Changes), zap.Int("partition", a.ID))
	r, ok := c.partitionReader(a, log)
	if !ok {
		return
	}
	c.setLag(a.ID, 0, true)
	defer c.setLag(a.ID, 0, false)

	fetched, stopFetching := startFetching(gctx, r, log)
	defer stopFetching()
	for {
		batch, ok := c.nextBatch(gctx, fetched)
		if !ok || !c.handle(gctx, cm, batch, log) {
			return
		}
	}
}

// partitionReader reads the changes topic's partition of a from the
// offset the group committed. A reader that cannot be positioned there is
// closed again: nothing is read from a place the group did not commit.
func (c *Consumer) partitionReader(a kafkago.PartitionAssignment, log *zap.Logger) (*kafkago.Reader, bool) {
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:        c.cfg.Brokers,
		Dialer:         c.cfg.Security.dialer(),
		Topic:          c.cfg.Topics.Changes,
		Partition:      a.ID,
		MinBytes:       1,
		MaxBytes:       16 << 20,
		MaxWait:        250 * time.Millisecond,
		QueueCapacity:  fetchAhead,
		ReadBackoffMin: 50 * time.Millisecond,
		ReadBackoffMax: time.Second,
		ErrorLogger:    kafkaLogger(log),
	})
	if err := r.SetOffset(a.Offset); err != nil {
		log.Error("positioning the partition reader failed", zap.Int64("offset", a.Offset), zap.Error(err))
		r.Close()
		return nil, false
	}
	return r, true
}

// startFetching runs a fetcher ahead of the handler, so that a batch
// takes everything fetched meanwhile and Kafka round trips overlap with
// store writes. The channel closes when fetching fails, which hands the
// partition back to the group. stop ends the fetcher, waits for it and
// closes r.
func startFetching(gctx context.Context, r *kafkago.Reader, log *zap.Logger) (fetched <-chan kafkago.Message, stop func()) {
	ch := make(chan kafkago.Message, fetchAhead)
	fetchCtx, stopFetch := context.WithCancel(gctx)
	fetchDone := make(chan struct{})
	go func() {
		defer close(fetchDone)
		defer close(ch)
		for {
			m, err := r.FetchMessage(fetchCtx)
			if err != nil {
				if fetchCtx.Err() == nil {
					log.Error("fetching changes failed; the partition is handed back to the group", zap.Error(err))
				}
				return
			}
			select {
			case ch <- m:
			case <-fetchCtx.Done():
				return
			}
		}
	}()
	return ch, func() {
		stopFetch()
		<-fetchDone
		r.Close()
	}
}

// nextBatch waits for the next fetched change and takes with it those
// already fetched, up to MaxBatch. It reports false when the generation
// ended with nothing in hand or fetching stopped.
func (c *Consumer) nextBatch(gctx context.Context, fetched <-chan kafkago.Message) ([]kafkago.Message, bool) {
	var batch []kafkago.Message
	select {
	case <-gctx.Done():
		return nil, false
	case m, ok := <-fetched:
		if !ok {
			return nil, false
		}
		batch = append(batch, m)
	}
	for len(batch) < c.cfg.MaxBatch {
		select {
		case m, ok := <-fetched:
			if !ok {
				return batch, true
			}
			batch = append(batch, m)
		default:
			return batch, true
		}
	}
	return batch, true
}

// handle makes a batch durable and marks it for commit. It reports whether
// the partition may go on; it returns false once the generation has ended
// (after marking what it could) or when the batch cannot be made durable.
func (c *Consumer) handle(gctx context.Context, cm *committer, batch []kafkago.Message, log *zap.Logger) bool {
	// The batch in hand is finished even if the generation ends meanwhile,
	// within DrainTimeout: draining on revoke saves the next owner the
	// repeat.
	ctx, cancel := drainContext(gctx, c.cfg.DrainTimeout)
	defer cancel()

	var events []dispatcher.Event
	for _, m := range batch {
		evs, err := derive(m)
		if errors.Is(err, dispatcher.ErrInvalidChange) {
			// Retrying cannot help a change that can never become events;
			// holding the partition for it would stop every change behind.
			c.metrics.rejected.Inc()
			log.Error("skipping a change that cannot become events",
				zap.Int64("offset", m.Offset), zap.ByteString("key", m.Key), zap.Error(err))
			continue
		}
		events = append(events, evs...)
	}
	if len(events) > 0 {
		msgs := make([]kafkago.Message, 0, len(events))
		for _, ev := range events {
			m, err := eventMessage(ev)
			if err != nil {
				// Derive made it, so it encodes; if not, it must not be
				// committed past.
				log.Error("encoding an event failed", zap.String("event_id", ev.ID), zap.Error(err))
				return false
			}
			msgs = append(msgs, m)
		}
		if err := retry(ctx, log, "producing events", func() error { return c.events.WriteMessages(ctx, msgs...) }); err != nil {
			return false
		}
		if err := retry(ctx, log, "recording events", func() error { return c.ing.IngestEvents(ctx, events) }); err != nil {
			return false
		}
	}
	last := batch[len(batch)-1]
	cm.mark(last.Partition, last.Offset+1)
	c.metrics.changes.Add(float64(len(batch)))
	c.setLag(last.Partition, last.HighWaterMark-(last.Offset+1), true)
	return gctx.Err() == nil
}

// derive reads a change record and derives its events.
func derive(m kafkago.Message) ([]dispatcher.Event, error) {
	var ch practice.Change
	if err := json.Unmarshal(m.Value, &ch); err != nil {
		return nil, fmt.Errorf("%w: the record is not a change: %w", dispatcher.ErrInvalidChange, err)
	}
	return dispatcher.Derive(ch)
}

// retry runs op until it succeeds or ctx is done, backing off between
// tries. It never gives up on its own: a change is only ever skipped
// because it can never succeed, not because its store was away.
func retry(ctx context.Context, log *zap.Logger, what string, op func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			log.Warn(what+" did not finish before the partition had to go; it is not committed", zap.Error(err))
			return err
		}
		log.Error(what+" failed; retrying", zap.Duration("in", wait), zap.Error(err))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// drainContext is a context for finishing work in hand: it outlives
// parent by grace.
func drainContext(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	})
	return ctx, func() {
		stop()
		cancel()
	}
}
