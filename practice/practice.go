// Package practice holds the practice record model that every backend speaks
// and the small interfaces the gateway reads and writes it through.
//
// Reads come back as JSON already in the /v1 wire shape: an adapter is a
// translation from a vendor's shape to ours, and doing that translation once,
// inside the adapter, keeps the request path free of a second encode. Writes
// take typed inputs so that validation lives in one place.
package practice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind names a resource collection as it appears in /v1 paths.
type Kind string

const (
	Clients     Kind = "clients"
	Engagements Kind = "engagements"
	Jobs        Kind = "jobs"
	Documents   Kind = "documents"
	Invoices    Kind = "invoices"
	People      Kind = "people"
)

// Kinds lists every resource collection in a stable order.
var Kinds = []Kind{Clients, Engagements, Jobs, Documents, Invoices, People}

// IDPrefix is the type prefix of a kind's identifiers.
func (k Kind) IDPrefix() string {
	switch k {
	case Clients:
		return "cli_"
	case Engagements:
		return "eng_"
	case Jobs:
		return "job_"
	case Documents:
		return "doc_"
	case Invoices:
		return "inv_"
	case People:
		return "usr_"
	}
	return ""
}

// Singular is the resource name used in events and messages ("job").
func (k Kind) Singular() string {
	if k == People {
		return "person"
	}
	return string(k[:len(k)-1])
}

// Tenant is one firm's live or sandbox records. Sandbox records are seeded
// copies that share nothing with live ones.
type Tenant struct {
	Firm    string
	Sandbox bool
}

func (t Tenant) String() string {
	if t.Sandbox {
		return t.Firm + "/sandbox"
	}
	return t.Firm + "/live"
}

// Query selects one page of a collection. Cursor is the adapter's own
// continuation token from the previous Page.Next; the API wraps it so callers
// only ever see an opaque cur_ token.
type Query struct {
	Filter Filter
	Cursor string
	Limit  int
}

// Filter holds every collection filter the API accepts. The API only sets
// the fields that are valid for the kind being listed; zero values mean
// "no constraint".
type Filter struct {
	UpdatedSince time.Time

	Owner  string // clients, jobs: usr_ id
	Status string // clients

	LastActivityAfter  time.Time // clients
	LastActivityBefore time.Time // clients

	Stage          string // jobs
	Client         string // jobs: cli_ id
	DeadlineAfter  string // jobs: YYYY-MM-DD, inclusive
	DeadlineBefore string // jobs: YYYY-MM-DD, inclusive
}

// Page is one page of a collection, each item already encoded as its /v1
// JSON object.
type Page struct {
	Items   []json.RawMessage
	HasMore bool
	// Next continues after the last item when HasMore is true.
	Next string
	// Total is about how many records the whole collection holds, when
	// the vendor says (an unfiltered listing of Xero's); 0 when unknown.
	// The sync shows it as a backfill's progress ("3,200 of about 5,000").
	Total int
	// Unusable are the records of the page the vendor listed whose answer
	// cannot be used (UnusableError): left out of Items, served as last
	// known, and tried again by the sync.
	Unusable []*UnusableError
}

// Reader serves collections and single records of the kinds an adapter owns.
type Reader interface {
	List(ctx context.Context, t Tenant, k Kind, q Query) (Page, error)
	Get(ctx context.Context, t Tenant, k Kind, id string) (json.RawMessage, error)
}

// ClientWriter creates and edits clients in the practice-management system.
type ClientWriter interface {
	CreateClient(ctx context.Context, t Tenant, in ClientInput) (json.RawMessage, error)
	UpdateClient(ctx context.Context, t Tenant, id string, in ClientInput) (json.RawMessage, error)
}

// JobWriter creates, edits and moves jobs in the practice-management system.
type JobWriter interface {
	CreateJob(ctx context.Context, t Tenant, in JobInput) (json.RawMessage, error)
	UpdateJob(ctx context.Context, t Tenant, id string, in JobInput) (json.RawMessage, error)
	MoveJob(ctx context.Context, t Tenant, id string, move StageMove) (json.RawMessage, error)
}

// Errors an adapter returns so that the API can answer with the right code.
// Anything else is an internal error.
var (
	ErrNotFound = errors.New("resource not found")
	ErrConflict = errors.New("conflicting change")
	// ErrUnavailable means the system behind the adapter cannot be reached
	// or its breaker is open; the caller may retry later.
	ErrUnavailable = errors.New("upstream unavailable")
	// ErrBadUpstream means the system answered with something we could not
	// read.
	ErrBadUpstream = errors.New("upstream answered with an unreadable response")

	// ErrNeedsReconnect means the vendor refused the grant a firm's
	// connection holds (revoked, expired unused, app removed): only the
	// firm's administrator can reconnect it.
	ErrNeedsReconnect = errors.New("the firm's connection to this system needs to be reconnected")

	// ErrNotConnected means no system serves this role of the firm: its
	// block neither names one nor leaves it to the demo records, and no
	// connection of it has connected (none made, the first still waiting
	// for consent, or disconnected).
	ErrNotConnected = errors.New("the firm has no system connected for this role")

	// ErrReconnecting means the firm's connection in this role waits for
	// its administrator (a reconnect under way, an organisation to choose,
	// a grant or key the vendor refused): reads answer from the copy held,
	// writes wait until it is connected again.
	ErrReconnecting = errors.New("the firm's connection to this system waits to be reconnected")
)

// InvalidError reports a rejected field of a write.
type InvalidError struct {
	Code    string // parameter_invalid, parameter_missing, invalid_stage
	Param   string
	Message string
	// Mapped are the stages a job can be moved to, for an invalid_stage
	// refusal of a stage the firm's system maps nothing to.
	Mapped []string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("%s: %s", e.Param, e.Message) }

// Invalid builds a parameter_invalid error for param.
func Invalid(param, format string, args ...any) error {
	return &InvalidError{Code: "parameter_invalid", Param: param, Message: fmt.Sprintf(format, args...)}
}

// Missing builds a parameter_missing error for param.
func Missing(param string) error {
	return &InvalidError{Code: "parameter_missing", Param: param, Message: fmt.Sprintf("The %s parameter is required.", param)}
}
