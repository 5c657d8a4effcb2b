package dispatcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/practicegw/practicegw/practice"
	"go.uber.org/zap"
)

// Ingest derives a change's events, records each once and fans each out to
// its deliveries. Everything is durable when it returns nil, so a caller
// may then acknowledge the change (commit a Kafka offset, delete an outbox
// entry). Ingesting the same change again records and delivers nothing new.
//
// An ErrInvalidChange can never succeed and should be logged and skipped;
// any other error is worth retrying.
func (e *Engine) Ingest(ctx context.Context, c practice.Change) error {
	events, err := Derive(c)
	if err != nil {
		return err
	}
	if err := e.IngestEvents(ctx, events); err != nil {
		return fmt.Errorf("ingest change %s: %w", c.ID, err)
	}
	return nil
}

// IngestEvents records events (from Derive) once each and fans each out to
// one delivery per subscribed endpoint, in two store writes however many
// events there are. It is durable when it returns nil; doing it again
// records and queues nothing new. Any error is worth retrying.
func (e *Engine) IngestEvents(ctx context.Context, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	endpoints := make(map[practice.Tenant][]Endpoint)
	for _, ev := range events {
		t := ev.Tenant()
		if _, ok := endpoints[t]; ok {
			continue
		}
		eps, err := e.b.Endpoints.Endpoints(ctx, t)
		if err != nil {
			return fmt.Errorf("list endpoints of %s: %w", t, err)
		}
		endpoints[t] = eps
	}
	created, err := e.b.Events.Record(ctx, events)
	if err != nil {
		return fmt.Errorf("record %d events: %w", len(events), err)
	}
	e.countRecorded(events, created)
	now := e.now()
	var deliveries []Delivery
	for _, ev := range events {
		// Fan out whether or not the event is new: if a crash came between
		// recording it and queuing its deliveries, this is where they are
		// queued after all.
		deliveries = append(deliveries, FanOut(ev, endpoints[ev.Tenant()], now)...)
	}
	if len(deliveries) == 0 {
		return nil
	}
	n, err := e.b.Queue.Enqueue(ctx, deliveries)
	if err != nil {
		return fmt.Errorf("queue %d deliveries: %w", len(deliveries), err)
	}
	if n > 0 {
		e.wake()
	}
	return nil
}

// IngestChanges ingests a batch of changes in one go, as Ingest does one:
// the embedded mode's dispatcher.Intake, for DrainOutboxTo. A change
// that can never become events is logged and dropped, so that it cannot
// hold up the ones behind it; any error returned is worth retrying, and
// none of the batch may be acknowledged until it succeeds. Batching
// matters: it is two store writes for the batch, against two per change.
func (e *Engine) IngestChanges(ctx context.Context, changes []practice.Change) error {
	var events []Event
	for _, c := range changes {
		evs, err := Derive(c)
		if errors.Is(err, ErrInvalidChange) {
			e.log.Error("dropping a change that cannot become events", zap.String("change_id", c.ID), zap.Error(err))
			continue
		}
		if err != nil {
			return err
		}
		events = append(events, evs...)
	}
	return e.IngestEvents(ctx, events)
}
