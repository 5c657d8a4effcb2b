package practice

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The /v1 resource shapes. Ids of linked records use the linked resource's
// name as the field ("client", "owner"), as payment APIs do; event payloads
// use *_id names because the specification fixes them.
//
// Every record carries a version: an integer that increases with each
// change of the record, the same on every gateway instance, so that a
// webhook receiver can drop a retried event about an older state that
// arrives after a newer one.

// Client is a practice's client: a person, a company, a partnership or a
// trust, with its contacts nested.
type Client struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	Name           string    `json:"name"`
	Type           string    `json:"type"`
	Status         string    `json:"status"`
	Owner          string    `json:"owner"`
	Email          string    `json:"email,omitempty"`
	Phone          string    `json:"phone,omitempty"`
	Country        string    `json:"country"`
	Contacts       []Contact `json:"contacts"`
	LastActivityAt time.Time `json:"last_activity_at"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Version        int64     `json:"version"`
}

// Contact is a person at a client.
type Contact struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Email string `json:"email,omitempty"`
	Phone string `json:"phone,omitempty"`
}

// Engagement is the agreed scope and fee, evidenced by an engagement letter.
// Engagements are created by the proposal process, never through the API.
type Engagement struct {
	ID             string     `json:"id"`
	Object         string     `json:"object"`
	Client         *string    `json:"client"`
	Status         string     `json:"status"`
	Scope          string     `json:"scope"`
	Fee            Money      `json:"fee"`
	Billing        string     `json:"billing"`
	LetterDocument string     `json:"letter_document"`
	SignedDocument string     `json:"signed_document,omitempty"`
	ReleasedJobs   []string   `json:"released_jobs"`
	SignedAt       *time.Time `json:"signed_at"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Version        int64      `json:"version"`
}

// Job is work in progress for a client, moving through stages.
type Job struct {
	ID         string     `json:"id"`
	Object     string     `json:"object"`
	Title      string     `json:"title"`
	Type       string     `json:"type,omitempty"`
	Client     string     `json:"client"`
	Engagement string     `json:"engagement,omitempty"`
	Owner      string     `json:"owner"`
	Stage      string     `json:"stage"`
	Deadline   string     `json:"deadline,omitempty"`
	ClosedAt   *time.Time `json:"closed_at"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	Version    int64      `json:"version"`
}

// Document is a document's metadata and a pointer into the firm's own
// document store. File content is never carried.
type Document struct {
	ID         string    `json:"id"`
	Object     string    `json:"object"`
	Name       string    `json:"name"`
	Kind       string    `json:"kind"`
	Client     *string   `json:"client"`
	Engagement string    `json:"engagement,omitempty"`
	MimeType   string    `json:"mime_type"`
	SizeBytes  int64     `json:"size_bytes"`
	Location   Location  `json:"location"`
	FiledAt    time.Time `json:"filed_at"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	Version    int64     `json:"version"`
}

// Location points into a document store.
type Location struct {
	Provider string `json:"provider"`
	Path     string `json:"path"`
	ItemID   string `json:"item_id"`
	DriveID  string `json:"drive_id,omitempty"`
	WebURL   string `json:"web_url,omitempty"`
}

// Invoice is the practice-side view of an invoice; the ledger itself stays
// in the firm's accounting system.
type Invoice struct {
	ID         string     `json:"id"`
	Object     string     `json:"object"`
	Number     string     `json:"number"`
	Client     *string    `json:"client"`
	Status     string     `json:"status"`
	Total      Money      `json:"total"`
	AmountDue  Money      `json:"amount_due"`
	IssuedOn   string     `json:"issued_on,omitempty"`
	DueOn      string     `json:"due_on,omitempty"`
	PaidAt     *time.Time `json:"paid_at"`
	SettledVia string     `json:"settled_via,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	Version    int64      `json:"version"`
}

// Person is someone at the firm; clients and jobs name one as owner.
type Person struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Name      string    `json:"name"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

// Money is a decimal amount in an ISO 4217 currency. The amount is a string
// so that no consumer ever rounds it through a float.
type Money struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// MinorUnits formats an amount held in pence or cents.
func MinorUnits(minor int64, currency string) Money {
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	return Money{Amount: fmt.Sprintf("%s%d.%02d", sign, minor/100, minor%100), Currency: currency}
}

// Vocabularies fixed by the contract.
var (
	JobStages = []string{"planned", "ready_to_start", "awaiting_client", "in_progress", "in_review",
		"awaiting_client_approval", "filed", "completed", "cancelled"}
	DocumentKinds = []string{"proposal", "engagement_letter", "signed_engagement_letter", "identity_verification",
		"source_document", "working_paper", "financial_statements", "tax_return", "correspondence", "other"}
	DocumentProviders  = []string{"sharepoint", "onedrive", "google_drive", "dropbox", "box", "filesystem"}
	InvoiceStatuses    = []string{"draft", "awaiting_approval", "issued", "partially_paid", "paid", "void"}
	ClientStatuses     = []string{"prospect", "active", "inactive", "archived"}
	ClientTypes        = []string{"individual", "company", "partnership", "trust", "charity"}
	EngagementStatuses = []string{"proposed", "sent", "signed", "declined", "ended"}
)

// ClosedStage reports whether a job in this stage is closed.
func ClosedStage(stage string) bool { return stage == "completed" || stage == "cancelled" }

// ValidStage reports whether stage is one of JobStages.
func ValidStage(stage string) bool { return contains(JobStages, stage) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ClientInput creates or edits a client. On update, nil fields are left as
// they are; on create, Name is required.
type ClientInput struct {
	Name     *string    `json:"name"`
	Type     *string    `json:"type"`
	Status   *string    `json:"status"`
	Owner    *string    `json:"owner"`
	Email    *string    `json:"email"`
	Phone    *string    `json:"phone"`
	Country  *string    `json:"country"`
	Contacts *[]Contact `json:"contacts"`
}

// Validate checks the fields that are set; create also requires a name.
func (in ClientInput) Validate(create bool) error {
	if create && in.Name == nil {
		return Missing("name")
	}
	if in.Name != nil && (len(*in.Name) == 0 || len(*in.Name) > 200) {
		return Invalid("name", "The name must be between 1 and 200 characters.")
	}
	if in.Type != nil && !contains(ClientTypes, *in.Type) {
		return Invalid("type", "The type must be one of %s.", strings.Join(ClientTypes, ", "))
	}
	if in.Status != nil && !contains(ClientStatuses, *in.Status) {
		return Invalid("status", "The status must be one of %s.", strings.Join(ClientStatuses, ", "))
	}
	if in.Country != nil && len(*in.Country) != 2 {
		return Invalid("country", "The country must be an ISO 3166-1 alpha-2 code such as GB.")
	}
	if in.Contacts != nil {
		if len(*in.Contacts) > 50 {
			return Invalid("contacts", "A client can have at most 50 contacts.")
		}
		for i, c := range *in.Contacts {
			if c.Name == "" {
				return Missing(fmt.Sprintf("contacts[%d].name", i))
			}
			if c.Role == "" {
				return Missing(fmt.Sprintf("contacts[%d].role", i))
			}
		}
	}
	return nil
}

// JobInput creates or edits a job. The stage is moved only through
// StageMove so that every move carries its note and raises one event.
type JobInput struct {
	Title      *string `json:"title"`
	Type       *string `json:"type"`
	Client     *string `json:"client"`
	Engagement *string `json:"engagement"`
	Owner      *string `json:"owner"`
	Deadline   *string `json:"deadline"`
}

// Validate checks the fields that are set; create also requires title and
// client.
func (in JobInput) Validate(create bool) error {
	if create && in.Title == nil {
		return Missing("title")
	}
	if create && in.Client == nil {
		return Missing("client")
	}
	if in.Title != nil && (len(*in.Title) == 0 || len(*in.Title) > 200) {
		return Invalid("title", "The title must be between 1 and 200 characters.")
	}
	if in.Deadline != nil {
		if _, err := time.Parse(time.DateOnly, *in.Deadline); err != nil {
			return Invalid("deadline", "The deadline must be a date in the form YYYY-MM-DD.")
		}
	}
	return nil
}

// StageMove moves a job to a stage, with an optional note.
type StageMove struct {
	Stage string `json:"stage"`
	Note  string `json:"note"`
}

// Validate checks the stage against the known stages.
func (m StageMove) Validate() error {
	if m.Stage == "" {
		return Missing("stage")
	}
	if !ValidStage(m.Stage) {
		return &InvalidError{Code: "invalid_stage", Param: "stage",
			Message: fmt.Sprintf("%q is not a job stage; use one of %s.", m.Stage, strings.Join(JobStages, ", "))}
	}
	if len(m.Note) > 2000 {
		return Invalid("note", "The note must be at most 2000 characters.")
	}
	return nil
}

// Change is one change to a record, as an adapter saw it. It is the input to
// the event pipeline: the API's own writes put one in the outbox in the same
// transaction as the write; upstream systems publish them from their own
// change data.
type Change struct {
	// ID identifies the change so that seeing it twice raises no second event.
	ID         string          `json:"id"`
	Firm       string          `json:"firm"`
	Sandbox    bool            `json:"sandbox"`
	Kind       Kind            `json:"resource"`
	ResourceID string          `json:"resource_id"`
	Before     json.RawMessage `json:"before"`
	After      json.RawMessage `json:"after"`
	Note       string          `json:"note,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
}

// OutboxEntry is a change waiting in an outbox, numbered in commit order.
type OutboxEntry struct {
	Seq    uint64
	Change Change
}

// VersionAt is the version of a vendor record whose system publishes when
// it last changed and no change counter: its modification time in
// milliseconds since the epoch, which increases with each change; at
// least 1.
func VersionAt(updated time.Time) int64 {
	return max(updated.UnixMilli(), 1)
}
