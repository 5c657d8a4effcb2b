package dispatcher

import (
	"fmt"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// State is where a delivery stands.
type State string

// Delivery states. pending: not attempted yet; retrying: failed at least
// once and scheduled again; delivered and failed are final until a replay.
const (
	StatePending   State = "pending"
	StateRetrying  State = "retrying"
	StateDelivered State = "delivered"
	StateFailed    State = "failed"
)

// Active reports whether the schedule still holds attempts for the state.
func (s State) Active() bool { return s == StatePending || s == StateRetrying }

// Valid reports whether s is a delivery state.
func (s State) Valid() bool { return s.Active() || s == StateDelivered || s == StateFailed }

// maxAttempts is the number of scheduled attempts before a delivery fails.
const maxAttempts = 6

// Trigger says why an attempt was made.
type Trigger string

const (
	TriggerScheduled Trigger = "scheduled"
	TriggerReplay    Trigger = "replay"
)

// Delivery is one event on its way to one endpoint, with every attempt.
type Delivery struct {
	ID         string `json:"id"`
	EventID    string `json:"event_id"`
	Event      string `json:"event"` // the name delivered, which may be an alias
	EndpointID string `json:"endpoint_id"`
	Firm       string `json:"-"`
	Sandbox    bool   `json:"sandbox"`
	State      State  `json:"state"`
	// Attempts is oldest first and never nil, so it encodes as [].
	Attempts []Attempt `json:"attempts"`
	// NextAttemptAt is when the next attempt is due; zero once final.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Tenant is the firm and mode the delivery belongs to.
func (d Delivery) Tenant() practice.Tenant { return practice.Tenant{Firm: d.Firm, Sandbox: d.Sandbox} }

// ScheduledAttempts counts the attempts the retry schedule has spent.
func (d Delivery) ScheduledAttempts() int {
	n := 0
	for _, a := range d.Attempts {
		if a.Trigger == TriggerScheduled {
			n++
		}
	}
	return n
}

// Attempt is one HTTP request to the endpoint and what came of it.
type Attempt struct {
	Number     int       `json:"number"`
	Trigger    Trigger   `json:"trigger"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	// ResponseCode is 0 when no response arrived.
	ResponseCode int    `json:"response_code"`
	Error        string `json:"error"`
	// ResponseExcerpt is the start of the response body: at most
	// maxExcerpt bytes of valid UTF-8.
	ResponseExcerpt string `json:"response_excerpt"`
}

// maxExcerpt bounds the response body kept per attempt.
const maxExcerpt = 1024

// Label is how the delivery log names the attempt: "attempt 3 of 6", or
// "attempt 7 (replay)" for a replay outside the schedule.
func (a Attempt) Label() string {
	if a.Trigger == TriggerReplay {
		return fmt.Sprintf("attempt %d (replay)", a.Number)
	}
	return fmt.Sprintf("attempt %d of %d", a.Number, maxAttempts)
}

// FanOut makes one pending delivery of ev for each enabled endpoint of the
// same firm and mode subscribed to it. Ids are deterministic, so fanning
// out the same event again yields the same deliveries.
func FanOut(ev Event, endpoints []Endpoint, now time.Time) []Delivery {
	var out []Delivery
	for _, ep := range endpoints {
		if ep.Status != EndpointEnabled || ep.Firm != ev.Firm || ep.Sandbox != ev.Sandbox {
			continue
		}
		name, ok := ep.DeliveryName(ev.Event)
		if !ok {
			continue
		}
		out = append(out, Delivery{
			ID:            deliveryID(ev.ID, ep.ID, name),
			EventID:       ev.ID,
			Event:         name,
			EndpointID:    ep.ID,
			Firm:          ev.Firm,
			Sandbox:       ev.Sandbox,
			State:         StatePending,
			Attempts:      []Attempt{},
			NextAttemptAt: now,
			CreatedAt:     now,
			UpdatedAt:     now,
		})
	}
	return out
}
