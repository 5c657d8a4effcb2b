package dispatcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Derive turns one change into the events it raises. It is the only place
// that decides which changes are worth an event, so the embedded pipeline
// and a Kafka consumer can never disagree.
//
// A change that raises nothing (a person's edit, a job edit that does not
// move its stage, the removal of an engagement or of a record never seen)
// yields no events and no error. A change that can never
// raise events (no id or firm, unreadable records, an event whose payload
// would exceed MaxPayload) is an ErrInvalidChange: the whole change is
// refused before any of it is recorded, so that it is either all delivered
// or visibly not.
func Derive(c practice.Change) ([]Event, error) {
	if c.ID == "" {
		return nil, fmt.Errorf("%w: change has no id", ErrInvalidChange)
	}
	if c.Firm == "" {
		return nil, fmt.Errorf("%w: change %s has no firm", ErrInvalidChange, c.ID)
	}
	events, err := derive(c)
	if err != nil {
		return nil, err
	}
	for _, ev := range events {
		if err := ev.checkSize(); err != nil {
			return nil, err
		}
	}
	return events, nil
}

func derive(c practice.Change) ([]Event, error) {
	if isAbsent(c.After) {
		return removal(c)
	}
	after, err := readRecord(c.After)
	if err != nil {
		return nil, fmt.Errorf("%w: change %s: after: %w", ErrInvalidChange, c.ID, err)
	}
	var before *record
	if !isAbsent(c.Before) {
		b, err := readRecord(c.Before)
		if err != nil {
			return nil, fmt.Errorf("%w: change %s: before: %w", ErrInvalidChange, c.ID, err)
		}
		before = &b
	}
	object, err := compact(c.After)
	if err != nil {
		return nil, fmt.Errorf("%w: change %s: after: %w", ErrInvalidChange, c.ID, err)
	}
	if after.ID == "" {
		after.ID = c.ResourceID
	}

	d := deriver{c: c, at: c.OccurredAt.UTC().Truncate(time.Millisecond), id: after.ID}
	switch c.Kind {
	case practice.Clients:
		return d.client(before, after, object)
	case practice.Jobs:
		return d.job(before, after, object)
	case practice.Engagements:
		return d.engagement(before, after, object)
	case practice.Documents:
		return d.document(before, after, object)
	case practice.Invoices:
		return d.invoice(before, after, object)
	}
	// People and kinds added later raise nothing until the contract names
	// events for them.
	return nil, nil
}

// record holds the fields of any resource that decide its events; each
// resource uses the ones it has.
type record struct {
	ID           string   `json:"id"`
	Client       string   `json:"client"`
	Engagement   string   `json:"engagement"`
	Stage        string   `json:"stage"`
	Status       string   `json:"status"`
	ReleasedJobs []string `json:"released_jobs"`
	SettledVia   string   `json:"settled_via"`
	// SignedAt is an engagement's: the first time it was seen signed,
	// which names its signing (SigningID).
	SignedAt *string `json:"signed_at"`
}

func readRecord(raw json.RawMessage) (record, error) {
	var r record
	err := json.Unmarshal(raw, &r)
	return r, err
}

func isAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

func compact(raw json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type deriver struct {
	c  practice.Change
	at time.Time
	id string
	// out collects events; the first error stops derivation.
	out []Event
	err error
}

func (d *deriver) raise(kind string, data any) {
	if d.err != nil {
		return
	}
	body, err := practice.Marshal(data)
	if err != nil {
		d.err = fmt.Errorf("%w: change %s: encode %s: %w", ErrInvalidChange, d.c.ID, kind, err)
		return
	}
	d.out = append(d.out, Event{
		ID:         EventID(d.c.ID, kind, d.at),
		Event:      kind,
		OccurredAt: d.at,
		Firm:       d.c.Firm,
		Sandbox:    d.c.Sandbox,
		Data:       body,
		ResourceID: d.id,
	})
}

func (d *deriver) done() ([]Event, error) { return d.out, d.err }

// Payloads. Field order is what receivers see; every payload names the ids
// the specification names and ends with the full resource after the change,
// so that a receiver needs no follow-up read.

type clientData struct {
	ClientID string          `json:"client_id"`
	Object   json.RawMessage `json:"object"`
}

func (d *deriver) client(before *record, after record, object json.RawMessage) ([]Event, error) {
	data := clientData{ClientID: d.id, Object: object}
	if before == nil {
		d.raise(ClientCreated, data)
		return d.done()
	}
	// An upstream that republishes an unchanged record must not wake every
	// receiver; anything else that differs is an update.
	if same, err := sameJSON(d.c.Before, object); err != nil || !same {
		d.raise(ClientUpdated, data)
	}
	return d.done()
}

func sameJSON(a json.RawMessage, compacted json.RawMessage) (bool, error) {
	ca, err := compact(a)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, compacted), nil
}

type jobData struct {
	JobID    string          `json:"job_id"`
	ClientID string          `json:"client_id,omitempty"`
	Object   json.RawMessage `json:"object"`
}

type stageData struct {
	JobID         string          `json:"job_id"`
	ClientID      string          `json:"client_id,omitempty"`
	PreviousStage string          `json:"previous_stage"`
	Stage         string          `json:"stage"`
	Note          string          `json:"note"`
	Object        json.RawMessage `json:"object"`
}

func (d *deriver) job(before *record, after record, object json.RawMessage) ([]Event, error) {
	if before == nil {
		d.raise(JobOpened, jobData{JobID: d.id, ClientID: after.Client, Object: object})
		return d.done()
	}
	// Jobs have no update event: an edit that leaves the stage alone is not
	// something receivers subscribed to.
	if before.Stage == after.Stage {
		return d.done()
	}
	d.raise(JobStageChanged, stageData{JobID: d.id, ClientID: after.Client,
		PreviousStage: before.Stage, Stage: after.Stage, Note: d.c.Note, Object: object})
	if practice.ClosedStage(after.Stage) && !practice.ClosedStage(before.Stage) {
		d.raise(JobClosed, jobData{JobID: d.id, ClientID: after.Client, Object: object})
	}
	return d.done()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SigningID is the id of the engagement.signed event of an engagement
// signed at at: the same for every change that shows that signing.
func SigningID(firm string, sandbox bool, engagementID string, at time.Time) string {
	return EventID(fmt.Sprintf("signing|%s|%t|%s|%s", firm, sandbox, engagementID, at.UTC().Format(time.RFC3339Nano)), EngagementSigned, at)
}

type engagementData struct {
	EngagementID string          `json:"engagement_id"`
	ClientID     string          `json:"client_id,omitempty"`
	Object       json.RawMessage `json:"object"`
}

// signedData's client_id is left out when the engagement names no client
// (its ledger's customer linked to none), as every other event's is.
type signedData struct {
	EngagementID string          `json:"engagement_id"`
	ClientID     string          `json:"client_id,omitempty"`
	ReleasedJobs []string        `json:"released_jobs"`
	Object       json.RawMessage `json:"object"`
}

const engagementSigned = "signed"

func (d *deriver) engagement(before *record, after record, object json.RawMessage) ([]Event, error) {
	if before == nil {
		d.raise(EngagementCreated, engagementData{EngagementID: d.id, ClientID: after.Client, Object: object})
	}
	// An engagement created already signed (an import) has become signed
	// too: receivers that only listen for signings must still hear of it.
	if after.Status == engagementSigned && (before == nil || before.Status != engagementSigned) {
		jobs := after.ReleasedJobs
		if jobs == nil {
			jobs = []string{}
		}
		d.raise(EngagementSigned, signedData{EngagementID: d.id, ClientID: after.Client,
			ReleasedJobs: jobs, Object: object})
		// A signing is one event however many changes show it: an
		// acceptance a vendor takes back and gives again, or one whose
		// first state was never recorded, carries the signed_at first
		// seen, and the event's id is the engagement's and that time's,
		// so the event log records it once.
		if at, err := time.Parse(time.RFC3339Nano, deref(after.SignedAt)); err == nil {
			e := &d.out[len(d.out)-1]
			e.ID, e.OccurredAt = SigningID(d.c.Firm, d.c.Sandbox, d.id, at), at.UTC()
		}
	}
	return d.done()
}

type documentData struct {
	DocumentID   string          `json:"document_id"`
	ClientID     string          `json:"client_id,omitempty"`
	EngagementID string          `json:"engagement_id,omitempty"`
	Object       json.RawMessage `json:"object"`
}

func (d *deriver) document(before *record, after record, object json.RawMessage) ([]Event, error) {
	if before == nil {
		d.raise(DocumentFiled, documentData{DocumentID: d.id, ClientID: after.Client,
			EngagementID: after.Engagement, Object: object})
	}
	return d.done()
}

// Removals. The object is the record's tombstone: there is no record after
// the change, and the tombstone's version follows the last one, so a
// receiver that applies by version applies the removal last.

type (
	clientDeletedData struct {
		ClientID string             `json:"client_id"`
		Object   practice.Tombstone `json:"object"`
	}
	jobDeletedData struct {
		JobID  string             `json:"job_id"`
		Object practice.Tombstone `json:"object"`
	}
	documentDeletedData struct {
		DocumentID string             `json:"document_id"`
		Object     practice.Tombstone `json:"object"`
	}
	invoiceDeletedData struct {
		InvoiceID string             `json:"invoice_id"`
		Object    practice.Tombstone `json:"object"`
	}
	personDeletedData struct {
		PersonID string             `json:"person_id"`
		Object   practice.Tombstone `json:"object"`
	}
)

// removal raises the <resource>.deleted event of a change whose after is
// null. A record whose last state is unknown raises nothing: its
// tombstone could not give a version later than what receivers hold.
func removal(c practice.Change) ([]Event, error) {
	kind := removalKind(c.Kind)
	if kind == "" || isAbsent(c.Before) {
		return nil, nil
	}
	before, err := readRecord(c.Before)
	if err != nil {
		return nil, fmt.Errorf("%w: change %s: before: %w", ErrInvalidChange, c.ID, err)
	}
	d := deriver{c: c, at: c.OccurredAt.UTC().Truncate(time.Millisecond), id: c.ResourceID}
	if d.id == "" {
		d.id = before.ID
	}
	ts := practice.NewTombstone(c.Kind, c.ResourceID, c.Before, d.at)
	var data any
	switch c.Kind {
	case practice.Clients:
		data = clientDeletedData{ClientID: d.id, Object: ts}
	case practice.Jobs:
		data = jobDeletedData{JobID: d.id, Object: ts}
	case practice.Documents:
		data = documentDeletedData{DocumentID: d.id, Object: ts}
	case practice.Invoices:
		data = invoiceDeletedData{InvoiceID: d.id, Object: ts}
	case practice.People:
		data = personDeletedData{PersonID: d.id, Object: ts}
	}
	d.raise(kind, data)
	return d.done()
}

type invoiceData struct {
	InvoiceID string          `json:"invoice_id"`
	ClientID  string          `json:"client_id,omitempty"`
	Object    json.RawMessage `json:"object"`
}

type paidData struct {
	InvoiceID  string          `json:"invoice_id"`
	ClientID   string          `json:"client_id,omitempty"`
	SettledVia string          `json:"settled_via"`
	Object     json.RawMessage `json:"object"`
}

// unraised reports whether an invoice in this status has not been raised
// yet: a draft, one awaiting approval, or one voided before it was issued.
func unraised(status string) bool {
	return status == "draft" || status == "awaiting_approval" || status == "void"
}

func (d *deriver) invoice(before *record, after record, object json.RawMessage) ([]Event, error) {
	// An invoice is raised once: when it first exists in a raised status,
	// whether it was created so or moved there from a draft. Raising drafts
	// too would give receivers two invoice.raised for one invoice.
	if !unraised(after.Status) && (before == nil || unraised(before.Status)) {
		d.raise(InvoiceRaised, invoiceData{InvoiceID: d.id, ClientID: after.Client, Object: object})
	}
	if after.Status == "paid" && (before == nil || before.Status != "paid") {
		d.raise(InvoicePaid, paidData{InvoiceID: d.id, ClientID: after.Client,
			SettledVia: after.SettledVia, Object: object})
	}
	return d.done()
}
