package dispatcher

import (
	"context"
	"math"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// The engine's dependencies, each as small as the job it does. The embedded
// store (store/bolt) and the shared one (store/redis) implement all of them,
// and store/storetest holds the one suite both must pass.

// EventLog records each event once and reads events back.
type EventLog interface {
	// Record stores, all or none, each event whose id is not stored yet;
	// created[i] says whether evs[i] was new. An event that occurred before
	// the horizon Prune set is not stored and not new. It is durable when
	// it returns.
	Record(ctx context.Context, evs []Event) (created []bool, err error)
	// Event returns the event with id, or ErrNotFound.
	Event(ctx context.Context, id string) (Event, error)
	// Events returns one page of a tenant's events in id order (which is
	// occurred_at order).
	Events(ctx context.Context, q EventQuery) (EventPage, error)
}

// EndpointRegistry is what delivery needs to know about endpoints.
type EndpointRegistry interface {
	// Endpoint returns the endpoint with id, or ErrNotFound.
	Endpoint(ctx context.Context, id string) (Endpoint, error)
	// Endpoints returns every endpoint of a tenant in id order, which is
	// creation order to the millisecond.
	Endpoints(ctx context.Context, t practice.Tenant) ([]Endpoint, error)
	// UpdateEndpoint applies fn to the stored endpoint atomically; fn's
	// error aborts the update and is returned.
	UpdateEndpoint(ctx context.Context, id string, fn func(*Endpoint) error) (Endpoint, error)
}

// EndpointCatalog adds and removes endpoints.
type EndpointCatalog interface {
	CreateEndpoint(ctx context.Context, ep Endpoint) error
	// DeleteEndpoint removes the endpoint and its deliveries, or returns
	// ErrNotFound.
	DeleteEndpoint(ctx context.Context, id string) error
}

// DeliveryQueue holds deliveries waiting for their next attempt, in one
// queue per endpoint, so that an endpoint with a long backlog (a dead one,
// say) costs a claim one look however many deliveries it holds.
type DeliveryQueue interface {
	// Enqueue stores new deliveries, all or none, skipping ids that exist,
	// deliveries whose endpoint does not, and deliveries of events older
	// than the horizon Prune set.
	Enqueue(ctx context.Context, ds []Delivery) (created int, err error)
	// Claim first makes deliveries whose lease expired due again, then
	// leases due deliveries: it visits endpoints in the order their
	// earliest waiting delivery fell due and takes from each its earliest
	// due deliveries, as many as the endpoint's room allows, until r.Max
	// are taken. next is the earliest time a waiting delivery falls due or
	// a lease expires, after r.Now (zero if none); it is r.Now when r.Max
	// cut the claim short. Endpoints passed over for lack of room do not
	// count towards next: the claimer knows when it makes room.
	Claim(ctx context.Context, r ClaimRequest) (claims []Claim, next time.Time, err error)
	// Release gives leased deliveries back unattempted, due no earlier than
	// notBefore (zero keeps their time). Leases no longer held are skipped.
	Release(ctx context.Context, leases []Lease, notBefore time.Time) error
	// Snooze holds all of an endpoint's deliveries back until until (zero
	// lifts it): none is claimed before then, and reads show a waiting
	// delivery's NextAttemptAt as no earlier. It is how an open circuit
	// breaker pauses an endpoint at once, whatever its backlog, and how
	// every dispatcher sharing the queue learns of it.
	Snooze(ctx context.Context, endpointID string, until time.Time) error
	// Backlog counts the deliveries waiting for an attempt, due now or
	// scheduled later; leased ones are not waiting.
	Backlog(ctx context.Context) (int64, error)
}

// AttemptLog records attempts and serves replays.
type AttemptLog interface {
	// Lease leases one delivery whatever its state, for a replay; ErrBusy
	// if someone holds an unexpired lease on it.
	Lease(ctx context.Context, deliveryID string, now, until time.Time) (Claim, error)
	// RecordAttempt appends the outcome's attempt, moves the delivery to
	// its new state and releases the lease, atomically. ErrLeaseLost if the
	// lease is no longer held.
	RecordAttempt(ctx context.Context, l Lease, o Outcome) (Delivery, error)
	// RequeueFailed marks an endpoint's failed deliveries created at or
	// after since for one replay attempt each, due at now.
	RequeueFailed(ctx context.Context, endpointID string, since, now time.Time) (int, error)
}

// DeliveryReader reads the delivery log.
type DeliveryReader interface {
	// Delivery returns the delivery with id, or ErrNotFound.
	Delivery(ctx context.Context, id string) (Delivery, error)
	// Deliveries returns one page of an endpoint's deliveries in creation
	// order.
	Deliveries(ctx context.Context, q DeliveryQuery) (DeliveryPage, error)
}

// Pruner removes what the webhook log's retention period has left
// behind, so that a store does not grow without bound.
type Pruner interface {
	// Prune takes one bounded step (one transaction, one script): it looks
	// at no more than r.Max records and removes, with their attempts and
	// every index entry that points at them, the finished (delivered or
	// failed) deliveries created before r.Before that nobody holds or has
	// queued for a replay, then the events that occurred before r.Before
	// and have no delivery left. Deliveries come first, so that an event
	// goes only once nothing needs it to be sent or replayed.
	//
	// It also raises the store's horizon to r.Before: from then on Record
	// refuses events that occurred before the horizon (reporting them not
	// new) and Enqueue skips their deliveries. An id is derived from its
	// change, so without this a change read again (a Kafka consumer
	// rewound, a CDC connector's backfill) would record a pruned event
	// afresh and deliver it a second time.
	//
	// Pruning is idempotent and safe to run from several processes at
	// once. Continue with res.Next until it is "".
	Prune(ctx context.Context, r PruneRequest) (res PruneResult, err error)
}

// Backends are the engine's dependencies.
type Backends struct {
	Events     EventLog
	Endpoints  EndpointRegistry
	Catalog    EndpointCatalog
	Queue      DeliveryQueue
	Attempts   AttemptLog
	Deliveries DeliveryReader
	// Pruner, if set, lets the engine enforce Config.Retention.
	Pruner Pruner
	// Feed, if set, lets Follow read events in record order.
	Feed EventFeed
}

// ClaimRequest asks for due deliveries. It is plain data, not a callback,
// so that a store can evaluate it inside one atomic step (a bbolt
// transaction, a Redis script).
type ClaimRequest struct {
	Now        time.Time
	LeaseUntil time.Time
	// Max bounds the deliveries claimed in all.
	Max int
	// PerEndpoint bounds the deliveries of one endpoint claimed.
	PerEndpoint int
	// Room overrides PerEndpoint for the endpoints it names: the claimer
	// has some of their deliveries in flight already, or a half-open
	// circuit breaker allows one probe. Zero or less passes one over.
	Room map[string]int
	// PerFirm bounds the deliveries of one firm claimed, all its
	// endpoints together; zero is no bound.
	PerFirm int
	// FirmRoom overrides PerFirm for the firms it names: the claimer
	// holds some of their deliveries already. Zero or less passes the
	// firm's endpoints over.
	FirmRoom map[string]int
}

// RoomFor is how many of an endpoint's deliveries r lets a store claim.
func (r ClaimRequest) RoomFor(endpointID string) int {
	if n, ok := r.Room[endpointID]; ok {
		return n
	}
	return r.PerEndpoint
}

// RoomForFirm is how many of a firm's deliveries r lets a store claim.
func (r ClaimRequest) RoomForFirm(firm string) int {
	if n, ok := r.FirmRoom[firm]; ok {
		return n
	}
	if r.PerFirm <= 0 {
		return math.MaxInt
	}
	return r.PerFirm
}

// Lease is a claim on a delivery until Until. Only the holder of Token may
// record an attempt; after Until anyone may claim the delivery again, which
// is how deliveries held by a crashed dispatcher are picked up.
type Lease struct {
	DeliveryID string
	Token      string
	Until      time.Time
}

// Claim is a leased delivery.
type Claim struct {
	Delivery Delivery
	Lease    Lease
	// Replay marks a delivery queued by RequeueFailed: its attempt is a
	// replay and leaves it final.
	Replay bool
	// Event is the delivery's event if the store read it with the claim
	// (a round trip saved per attempt); nil otherwise.
	Event *Event
}

// Outcome is what an attempt did to a delivery.
type Outcome struct {
	// Attempt is nil when the delivery ends without an attempt (its
	// endpoint was disabled or deleted meanwhile).
	Attempt *Attempt
	State   State
	// NextAttemptAt is when the delivery is due again, if State is active.
	NextAttemptAt time.Time
	At            time.Time
}

// PruneRequest asks for one step of pruning.
type PruneRequest struct {
	// Before is the retention horizon: older records go.
	Before time.Time
	// Max bounds the records one step looks at, kept or removed.
	Max int
	// Cursor continues from a previous step's Next; "" starts over.
	Cursor string
}

// PruneResult is what one step of pruning removed.
type PruneResult struct {
	Events     int
	Deliveries int
	// Next continues after the last record looked at; "" once nothing
	// older than Before is left to look at.
	Next string
}

// EventQuery selects a page of a tenant's events.
type EventQuery struct {
	Tenant practice.Tenant
	// Kinds keeps events of any of these kinds; empty keeps all.
	Kinds []string
	// From and To bound occurred_at to [From, To), at millisecond
	// precision; zero leaves a side open.
	From, To time.Time
	// Cursor continues from a previous page's Next.
	Cursor string
	Limit  int
	// Scan bounds how many of the tenant's events one page looks at when
	// Kinds filters them, so that a rare kind over a long history costs
	// each page a bounded read: a page that reaches the bound before it is
	// full ends there, with HasMore and a Next that continues from the
	// last event looked at (a page may then hold fewer events than Limit,
	// even none). Zero is defaultEventScan.
	Scan int
}

// defaultEventScan is EventQuery.Scan's default.
const defaultEventScan = 5000

// ScanBound is how many index entries one filtered page may look at.
func (q EventQuery) ScanBound() int {
	if q.Scan <= 0 {
		return defaultEventScan
	}
	return q.Scan
}

// EventPage is one page of events.
type EventPage struct {
	Events  []Event
	HasMore bool
	// Next continues after the last event when HasMore.
	Next string
}

// DeliveryQuery selects a page of an endpoint's deliveries.
type DeliveryQuery struct {
	EndpointID string
	// States keeps deliveries in any of these states; empty keeps all.
	States []State
	// From and To bound created_at to [From, To); zero leaves a side open.
	From, To time.Time
	Cursor   string
	Limit    int
}

// DeliveryPage is one page of deliveries.
type DeliveryPage struct {
	Deliveries []Delivery
	HasMore    bool
	Next       string
}

// Page sizes, as the API's collections have them.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)
