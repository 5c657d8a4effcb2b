package dispatcher

import (
	"context"
	"fmt"

	"github.com/practicegw/practicegw/adapters"
)

// Ingest derives a change's events, records each once and fans each out to
// its deliveries. Everything is durable when it returns nil, so a caller
// may then acknowledge the change (commit a Kafka offset, delete an outbox
// entry). Ingesting the same change again records and delivers nothing new.
//
// An ErrInvalidChange can never succeed and should be logged and skipped;
// any other error is worth retrying.
func (e *Engine) Ingest(ctx context.Context, c adapters.Change) error {
	if c.Firm == "" {
		return fmt.Errorf("%w: change %s has no firm", ErrInvalidChange, c.ID)
	}
	events, err := Derive(c)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	// Refuse the whole change before recording any of it, so that it is
	// either all delivered or visibly not.
	for _, ev := range events {
		if err := ev.checkSize(); err != nil {
			return err
		}
	}
	endpoints, err := e.b.Endpoints.Endpoints(ctx, adapters.Tenant{Firm: c.Firm, Sandbox: c.Sandbox})
	if err != nil {
		return fmt.Errorf("ingest change %s: list endpoints: %w", c.ID, err)
	}
	now := e.now()
	var deliveries []Delivery
	for _, ev := range events {
		// Fan out whether or not the event is new: if a crash came between
		// recording it and queuing its deliveries, this is where they are
		// queued after all.
		if _, err := e.b.Events.Record(ctx, ev); err != nil {
			return fmt.Errorf("ingest change %s: record event %s: %w", c.ID, ev.ID, err)
		}
		deliveries = append(deliveries, FanOut(ev, endpoints, now)...)
	}
	if len(deliveries) == 0 {
		return nil
	}
	created, err := e.b.Queue.Enqueue(ctx, deliveries)
	if err != nil {
		return fmt.Errorf("ingest change %s: queue deliveries: %w", c.ID, err)
	}
	if created > 0 {
		e.wake()
	}
	return nil
}
