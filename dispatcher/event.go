package dispatcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/practicegw/practicegw/practice"
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
	ClientDeleted        = "client.deleted"
	JobDeleted           = "job.deleted"
	DocumentDeleted      = "document.deleted"
	InvoiceDeleted       = "invoice.deleted"
	PersonDeleted        = "person.deleted"
	EngagementLetterSign = "engagement_letter.signed" // a subscription-only alias of EngagementSigned
	AllEvents            = "*"
)

// KindSpec describes one event kind as receivers see it: the single table
// the API's event catalog, the kind checks and subscriptions read.
type KindSpec struct {
	Name    string
	Summary string // when it is raised, in one sentence
	// Resource is the record carried in data.object, as it is after the
	// change.
	Resource practice.Kind
	// Data is a zero value of the data payload Derive encodes for the kind.
	Data any
	// AliasOf, for a subscription-only alias, names the kind recorded: an
	// endpoint subscribed to the alias receives that kind's event (same id)
	// under the alias.
	AliasOf string
	// Removal says the kind announces a record's removal: its object is
	// the record's tombstone (practice.Tombstone), and only a subscriber
	// that names the kind receives it (see KindFilter.DeliveryName).
	Removal bool
}

var catalog = []KindSpec{
	{Name: ClientCreated, Summary: "A client was created.", Resource: practice.Clients, Data: clientData{}},
	{Name: ClientUpdated, Summary: "A client changed: any field of the record differs from before.",
		Resource: practice.Clients, Data: clientData{}},
	{Name: EngagementCreated, Summary: "An engagement was created by the proposal process.",
		Resource: practice.Engagements, Data: engagementData{}},
	{Name: EngagementSigned, Summary: "An engagement letter was signed (or an engagement was imported already signed), releasing the jobs in released_jobs.",
		Resource: practice.Engagements, Data: signedData{}},
	{Name: JobOpened, Summary: "A job was opened.", Resource: practice.Jobs, Data: jobData{}},
	{Name: JobStageChanged, Summary: "A job moved from previous_stage to stage, with the note given for the move.",
		Resource: practice.Jobs, Data: stageData{}},
	{Name: JobClosed, Summary: "A job reached completed or cancelled; it follows that move's job.stage_changed.",
		Resource: practice.Jobs, Data: jobData{}},
	{Name: DocumentFiled, Summary: "A document was filed in the firm's document store.",
		Resource: practice.Documents, Data: documentData{}},
	{Name: InvoiceRaised, Summary: "An invoice was raised: it exists for the first time in a status past draft and approval, and not void.",
		Resource: practice.Invoices, Data: invoiceData{}},
	{Name: InvoicePaid, Summary: "An invoice was paid in full; settled_via says how.",
		Resource: practice.Invoices, Data: paidData{}},
	{Name: ClientDeleted, Summary: "A client was removed from the firm's system; object is its tombstone. Sent only to subscribers that name this kind.",
		Resource: practice.Clients, Data: clientDeletedData{}, Removal: true},
	{Name: JobDeleted, Summary: "A job was removed from the firm's system; object is its tombstone. Sent only to subscribers that name this kind.",
		Resource: practice.Jobs, Data: jobDeletedData{}, Removal: true},
	{Name: DocumentDeleted, Summary: "A document was removed from the firm's document store (deleted, trashed or moved out of scope); object is its tombstone. Sent only to subscribers that name this kind.",
		Resource: practice.Documents, Data: documentDeletedData{}, Removal: true},
	{Name: InvoiceDeleted, Summary: "An invoice was removed from the firm's ledger; object is its tombstone. Sent only to subscribers that name this kind.",
		Resource: practice.Invoices, Data: invoiceDeletedData{}, Removal: true},
	{Name: PersonDeleted, Summary: "A person (a member of the firm's staff) was removed from the firm's system; object is its tombstone. Sent only to subscribers that name this kind.",
		Resource: practice.People, Data: personDeletedData{}, Removal: true},
	{Name: EngagementLetterSign, Summary: "An engagement letter was signed: engagement.signed, delivered under this name to endpoints subscribed to it.",
		Resource: practice.Engagements, Data: signedData{}, AliasOf: EngagementSigned},
}

// Catalog lists every event kind, then the aliases, in a stable order.
func Catalog() []KindSpec { return slices.Clone(catalog) }

// EnvelopeShape is a zero value of the envelope every event is delivered
// in, for describing it; its data is the kind's Data.
func EnvelopeShape() any { return envelope{} }

// Kinds lists the recorded event kinds in a stable order. Aliases are not
// kinds: nothing is ever recorded under one.
func Kinds() []string {
	var out []string
	for _, k := range catalog {
		if k.AliasOf == "" {
			out = append(out, k.Name)
		}
	}
	return out
}

// isKind reports whether k is a recorded event kind.
func isKind(k string) bool { return slices.Contains(Kinds(), k) }

// removalKind is the kind announcing removals of records of k, or "" when
// k has none.
func removalKind(k practice.Kind) string {
	for _, spec := range catalog {
		if spec.Removal && spec.Resource == k {
			return spec.Name
		}
	}
	return ""
}

// isRemoval reports whether kind announces removals.
func isRemoval(kind string) bool {
	for _, spec := range catalog {
		if spec.Name == kind {
			return spec.Removal
		}
	}
	return false
}

// canonicalKind maps a subscribable name to the kind recorded for it.
func canonicalKind(name string) string {
	for _, k := range catalog {
		if k.Name == name && k.AliasOf != "" {
			return k.AliasOf
		}
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
	return practice.Marshal(envelope{
		ID:         e.ID,
		Event:      e.Event,
		OccurredAt: e.OccurredAt.UTC().Format(occurredAtLayout),
		Firm:       e.Firm,
		Sandbox:    e.Sandbox,
		Data:       data,
	})
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
