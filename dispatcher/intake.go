package dispatcher

import (
	"errors"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/practice"
	"go.uber.org/zap"
)

// TxLog is what TxIntake needs of a store that can record events and
// queue deliveries inside a transaction its caller holds: the embedded
// store's (store/bolt), whose file also holds the records the changes are
// of. Each is its store's Record, Endpoints and Enqueue, run in tx;
// RecordTx takes each event's envelope already encoded
// (Event.MarshalJSON), work done before the transaction.
//
// EnqueueTx asks take of every delivery it creates whether the engine
// starts it at once: if so it stores the delivery leased until leaseUntil
// rather than queued, and returns its claim.
type TxLog[Tx any] interface {
	RecordTx(tx Tx, evs []Event, envelopes [][]byte) (created []bool, err error)
	EndpointsTx(tx Tx, t practice.Tenant) ([]Endpoint, error)
	EnqueueTx(tx Tx, ds []Delivery, take func(Delivery) bool, leaseUntil time.Time) (created int, claims []Claim, err error)
}

// TxIntake is the embedded mode's first stage run inside the transaction
// that writes the change: the change, its events and their deliveries are
// one commit, so the write's answer is given only once its webhooks are as
// durable as the record, and no outbox entry, drain or second commit stands
// between the change and its first attempt: a delivery the engine can
// start at once is handed to the delivery loop as the transaction commits
// (handoff.go), and the loop is woken for the rest.
//
// It is a transactional outbox whose entries are the deliveries
// themselves. The fan-out reads the endpoints in the same transaction, so
// an endpoint receives the events of every change committed after its own
// registration, and none of those before.
type TxIntake[Tx any] struct {
	e   *Engine
	log TxLog[Tx]
}

// NewTxIntake is the intake of e's pipeline over log, whose store must be
// e's.
func NewTxIntake[Tx any](e *Engine, log TxLog[Tx]) *TxIntake[Tx] {
	return &TxIntake[Tx]{e: e, log: log}
}

// Log derives the changes' events and encodes them, outside any
// transaction; a change that can never become events is logged and
// dropped, as IngestChanges drops it, and the write goes on without it.
// The function it returns records each event once and queues its
// deliveries in tx; it may run more than once for one write (a group
// commit retries a batch without a write that failed), each run undoing
// the last one's handoffs, and what its last successful run returns is to
// be called once with whether tx committed: then it counts the events,
// hands the deliveries it took to the loop and wakes it; else it gives
// their slots back.
func (in *TxIntake[Tx]) Log(changes []practice.Change) (func(Tx) (func(bool), error), error) {
	e := in.e
	var events []Event
	for _, c := range changes {
		evs, err := Derive(c)
		if errors.Is(err, ErrInvalidChange) {
			e.log.Error("dropping a change that cannot become events", zap.String("change_id", c.ID), zap.Error(err))
			continue
		}
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	envelopes := make([][]byte, len(events))
	for i, ev := range events {
		env, err := ev.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
		}
		// The bytes stored are the bytes every attempt sends.
		envelopes[i], events[i].envelope = env, env
	}
	var last *handoff
	return func(tx Tx) (func(bool), error) {
		if last != nil {
			last.cancel()
		}
		if len(events) == 0 {
			return func(bool) {}, nil
		}
		last = &handoff{e: e}
		settle, err := in.append(tx, events, envelopes, last)
		if err != nil {
			last.cancel()
		}
		return settle, err
	}, nil
}

func (in *TxIntake[Tx]) append(tx Tx, events []Event, envelopes [][]byte, h *handoff) (func(bool), error) {
	e := in.e
	endpoints := make(map[practice.Tenant][]Endpoint)
	for _, ev := range events {
		t := ev.Tenant()
		if _, ok := endpoints[t]; ok {
			continue
		}
		eps, err := in.log.EndpointsTx(tx, t)
		if err != nil {
			return nil, fmt.Errorf("list endpoints of %s: %w", t, err)
		}
		endpoints[t] = eps
	}
	created, err := in.log.RecordTx(tx, events, envelopes)
	if err != nil {
		return nil, fmt.Errorf("record %d events: %w", len(events), err)
	}
	now := e.now()
	var deliveries []Delivery
	for _, ev := range events {
		// Fanned out whether or not the event is new, as IngestEvents does.
		deliveries = append(deliveries, FanOut(ev, endpoints[ev.Tenant()], now)...)
	}
	queued := 0
	var claims []Claim
	if len(deliveries) > 0 {
		if queued, claims, err = in.log.EnqueueTx(tx, deliveries, h.take, now.Add(e.leaseFor)); err != nil {
			return nil, fmt.Errorf("queue %d deliveries: %w", len(deliveries), err)
		}
	}
	return func(committed bool) {
		if !committed {
			h.cancel()
			return
		}
		e.countRecorded(events, created)
		e.events.keep(events)
		h.hand(claims)
		if queued > len(claims) {
			e.wake()
		}
	}, nil
}

// countRecorded counts the events an ingest recorded and tells Follow of
// them.
func (e *Engine) countRecorded(events []Event, created []bool) {
	for i, ev := range events {
		if i < len(created) && created[i] {
			e.metrics.events.WithLabelValues(ev.Event).Inc()
			e.recorded.fire()
		}
	}
}
