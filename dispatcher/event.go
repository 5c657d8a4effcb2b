package dispatcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/internal/practice"
)

// Event kinds, as the contract names them.
const (
	ClientCreated        = "client.created"
	ClientUpdated        = "client.updated"
	EngagementCreated    = "engagement.created"
	EngagementSigned     = "engagement.signed"
	JobOpened            = "job.opened"
	JobStageChanged      = "job.stage_changed"
	JobClosed            = "job.closed"
	DocumentFiled        = "document.filed"
	InvoiceRaised        = "invoice.raised"
	InvoicePaid          = "invoice.paid"
	EngagementLetterSign = "engagement_letter.signed" // a subscription-only alias of EngagementSigned
	AllEvents            = "*"
)

// Kinds lists the recorded event kinds in a stable order. Aliases are not
// kinds: nothing is ever recorded under one.
func Kinds() []string {
	return []string{ClientCreated, ClientUpdated, EngagementCreated, EngagementSigned,
		JobOpened, JobStageChanged, JobClosed, DocumentFiled, InvoiceRaised, InvoicePaid}
}

// IsKind reports whether k is a recorded event kind.
func IsKind(k string) bool {
	for _, v := range Kinds() {
		if v == k {
			return true
		}
	}
	return false
}

// canonicalKind maps a subscribable name to the kind recorded for it.
func canonicalKind(name string) string {
	if name == EngagementLetterSign {
		return EngagementSigned
	}
	return name
}

// MaxPayload is the largest envelope delivered. Larger events are refused
// when they are recorded, not when they are sent: a payload that can never
// be delivered must not sit in the retry schedule.
const MaxPayload = 256 << 10

// Event is one recorded occurrence. Its JSON form is exactly the webhook
// envelope.
type Event struct {
	ID         string
	Event      string
	OccurredAt time.Time
	Firm       string
	Sandbox    bool
	Data       json.RawMessage
	// ResourceID is the record the event is about; it is not part of the
	// envelope but keys the event in an ordered log (a Kafka partition key).
	ResourceID string

	// envelope is the JSON the event was read from (UnmarshalJSON), its
	// envelope under its own name: Envelope returns it rather than encoding
	// the event again for every delivery attempt. An event built in code
	// has none.
	envelope []byte
}

// Tenant is the firm and mode the event belongs to.
func (e Event) Tenant() practice.Tenant { return practice.Tenant{Firm: e.Firm, Sandbox: e.Sandbox} }

// envelope is the wire shape; field order is the contract's.
type envelope struct {
	ID         string          `json:"id"`
	Event      string          `json:"event"`
	OccurredAt string          `json:"occurred_at"`
	Firm       string          `json:"firm"`
	Sandbox    bool            `json:"sandbox"`
	Data       json.RawMessage `json:"data"`
}

// Milliseconds are enough to order changes and keep the string fixed-width,
// which receivers sorting on occurred_at as text rely on.
const occurredAtLayout = "2006-01-02T15:04:05.000Z"

func (e Event) MarshalJSON() ([]byte, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return marshal(envelope{
		ID:         e.ID,
		Event:      e.Event,
		OccurredAt: e.OccurredAt.UTC().Format(occurredAtLayout),
		Firm:       e.Firm,
		Sandbox:    e.Sandbox,
		Data:       data,
	})
}

// marshal encodes v without HTML escaping: receivers compare names and
// paths byte for byte, and "&" in a client name must arrive as written, not
// as \u0026, in the bytes that are signed.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (e *Event) UnmarshalJSON(b []byte) error {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, env.OccurredAt)
	if err != nil {
		return fmt.Errorf("occurred_at: %w", err)
	}
	*e = Event{ID: env.ID, Event: env.Event, OccurredAt: at, Firm: env.Firm, Sandbox: env.Sandbox,
		Data: env.Data, ResourceID: e.ResourceID}
	// Stores keep what MarshalJSON wrote; sending those bytes as they are
	// also keeps every attempt's body identical, whatever version wrote it.
	e.envelope = bytes.Clone(b)
	return nil
}

// Envelope is the body delivered to an endpoint subscribed under name: the
// event itself, or for the engagement_letter.signed alias the same event
// (same id) carrying that name.
func (e Event) Envelope(name string) ([]byte, error) {
	if name == e.Event && e.envelope != nil {
		return e.envelope, nil
	}
	e.Event = name
	body, err := e.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	return body, nil
}

// checkSize refuses an event whose envelope would exceed MaxPayload under
// its longest delivered name.
func (e Event) checkSize() error {
	name := e.Event
	if e.Event == EngagementSigned {
		name = EngagementLetterSign
	}
	body, err := e.Envelope(name)
	if err != nil {
		return err
	}
	if len(body) > MaxPayload {
		return fmt.Errorf("%w: event %s (%s) is %d bytes; webhook payloads are limited to %d bytes",
			ErrInvalidChange, e.ID, e.Event, len(body), MaxPayload)
	}
	return nil
}
