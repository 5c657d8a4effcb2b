// Package karbon serves a firm's clients, jobs and people from its Karbon
// practice (Karbon API v3): contacts, organizations and client groups as
// clients, work items as jobs and users as people, with client and job
// writes translated to Karbon's, and Karbon's webhooks turned into change
// records.
//
// Karbon's billing is the firm's ledger when the firm says so (ledger
// karbon, or records karbon with no ledger named): invoices.go. Karbon has
// no engagements or documents: List answers an empty page and Get
// practice.ErrNotFound for them. The firm's engagement letters stay with
// the demo records or its document store.
//
// Each /v1 record is built from Karbon's published shapes:
//
//   - client: id cli_c-<ContactKey>, cli_o-<OrganizationKey> or
//     cli_g-<ClientGroupKey>; status from the contact type
//     (Config.ClientStatuses); owner from the ClientOwner of the client
//     team; contacts from the organization's contacts (a person is its own
//     primary contact); updated_at and last_activity_at from
//     LastModifiedDateTime, which is also created_at because Karbon
//     publishes no creation time.
//   - job: id job_<WorkItemKey>; stage from the work status
//     (Config.StageMap); owner from the assignee; deadline from
//     DeadlineDate (else DueDate); created_at from StartDate and
//     updated_at from CompletedDate or StartDate, the only times a work
//     item carries (a webhook's TimeStamp is used on change records).
//   - person: id usr_<UserKey>, role from the user's first Karbon role.
//     Karbon publishes no times for users; they read as the zero time.
//   - invoice: id inv_<InvoiceKey>; number, total, amount due, currency,
//     issued and due dates as Karbon gives them; client the billed
//     client's cli_ id where Karbon is the firm's records system (the
//     same practice), else the records system's client for it (linking's
//     rule) or null; status from InvoiceStatus and what is due
//     (invoiceStatus), nothing due on a voided one; settled_via and paid_at from the latest payment
//     not reversed (a card or a bank debit through Karbon Payments, a
//     manual payment by its method, Config.SettlementRails); updated_at
//     UpdatedAt, created_at the invoice date.
//
// Paging walks Karbon's OData pages: the first asks for $top (at most
// 100), each later one is read at the @odata.nextLink Karbon gave, as
// given, and a cursor carries that link; clients go through contacts,
// then organizations, then client groups; with updated_since or
// last_activity_after, contacts and organizations are read newest first
// ($orderby=LastModifiedDateTime desc) and each ends at its first row
// modified before it. Filters Karbon supports go into $filter (a job's
// client, owner and, where the stage has one primary status, its primary
// status; a client status with exactly one contact type); the rest are applied
// here, fetching further Karbon pages until a page of ours is full, at
// most Config.MaxScanPages Karbon pages per call (then the page is short
// and has_more is true, never silently cut). Karbon's list of clients
// does not carry owners or contacts, so each client is read in full once
// and kept until its LastModifiedDateTime changes: a contact with its
// business cards (the one $expand Karbon publishes per contact read; the
// owner is its ClientOwner), an organization with its business cards,
// client team and contacts, a client group with its card and team.
package karbon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Config is one firm's Karbon. Credentials may hold {env.X} placeholders,
// which the caller expands before New.
type Config struct {
	// Firm is the firm these records belong to; the wiring sets it from
	// the enclosing firm block. When set, other firms' reads are not
	// found. Change records carry it.
	Firm string `json:"firm,omitempty"`
	// AccessKey is the AccessKey header, from Karbon's Settings >
	// Connected Apps; Bearer is the application's id, sent as
	// "Authorization: Bearer". Both are required.
	AccessKey string `json:"access_key"`
	Bearer    string `json:"bearer"`
	// BaseURL is Karbon's API [https://api.karbonhq.com].
	BaseURL string `json:"base_url,omitempty"`

	// StageMap maps Karbon work statuses to job stages, over what the
	// statuses' names suggest (practice.SuggestStage). A key is a
	// secondary status ("Waiting on client"), a full work status ("In
	// Progress - In Review") or a primary status (Planned, ReadyToStart,
	// InProgress, Waiting, Completed); case, spacing and punctuation do
	// not matter; a status mapped to "" maps to nothing. By their names
	// the primaries map to planned, ready_to_start, in_progress,
	// awaiting_client and completed, and secondaries such as "In Review"
	// to in_review, "Awaiting client approval" to
	// awaiting_client_approval, "Filed" and "Lodged" to filed,
	// "Cancelled" to cancelled; a secondary that maps to nothing takes
	// its primary's stage. A stage move writes the first status in
	// Karbon's own order that maps to the stage, a primary before its
	// secondaries; a stage none maps to is refused (invalid_stage, naming
	// the stages that do).
	StageMap map[string]string `json:"stage_map,omitempty"`
	// ClientStatuses maps Karbon contact types to client statuses, over
	// the defaults ("Client": active, "Prospect": prospect, "Former
	// Client" and "Inactive Client": inactive, "Archived": archived; other
	// types containing "client" are active). Contacts and organizations
	// of any other type (suppliers, other contacts) are not clients.
	ClientStatuses map[string]string `json:"client_statuses,omitempty"`
	// ClientGroupType is the client type of client groups [company].
	ClientGroupType string `json:"client_group_type,omitempty"`
	// DefaultCountry is the country of clients whose cards name none [GB].
	DefaultCountry string `json:"default_country,omitempty"`

	// DefaultAssignee (usr_ id or email) is assigned jobs created without
	// an owner; Karbon requires an assignee. Empty: owner is required.
	DefaultAssignee string `json:"default_assignee,omitempty"`
	// NoteAuthor is the email of the Karbon user a stage move's note is
	// written as, on the work item's timeline. Empty: notes are not
	// written to Karbon (they still reach the change record).
	NoteAuthor string `json:"note_author,omitempty"`

	// WebhookSigningKey is the SigningKey given when subscribing to
	// Karbon's webhooks. Karbon then sends the hex HMAC-SHA256 of the raw
	// body in the Signature header (WebhookSignatureHeader). Without a
	// key every webhook is refused.
	WebhookSigningKey      string `json:"webhook_signing_key,omitempty"`
	WebhookSignatureHeader string `json:"webhook_signature_header,omitempty"`
	// WebhookTimeout is how long one webhook delivery reads what it named
	// before it is answered [5s]; the rest is read after, by the sync.
	WebhookTimeout upstream.Duration `json:"webhook_timeout,omitempty"`
	// WebhookMaxRecords bounds the records one delivery keeps for
	// reading from Karbon [1000]; records past it are acknowledged and
	// left to the sync (polling and the reconciliation).
	WebhookMaxRecords int `json:"webhook_max_records,omitempty"`

	// SettlementRails maps words of a manual payment's method (or a
	// Karbon Payments bank debit's funding) to the settled_via rail, over
	// the defaults (those of every ledger, and cash, other).
	SettlementRails map[string]string `json:"settlement_rails,omitempty"`

	// PageSize is the $top of each Karbon page [100, Karbon's maximum].
	PageSize int `json:"page_size,omitempty"`
	// MaxScanPages bounds the Karbon pages one List reads [10].
	MaxScanPages int `json:"max_scan_pages,omitempty"`
	// DetailConcurrency is how many client or user details are read at
	// once [4].
	DetailConcurrency int `json:"detail_concurrency,omitempty"`
	// Upstream is the resilience policy; the budget defaults to Karbon's
	// published 120 requests a minute per account.
	Upstream upstream.Policy `json:"upstream,omitzero"`
}

// Adapter is one firm's Karbon. It is safe for concurrent use.
type Adapter struct {
	cfg      Config
	c        *upstream.Client
	log      *zap.Logger
	clock    upstream.Clock
	stages   atomic.Pointer[stageMap]
	statuses map[string]string
	rec      *changes.Recorder
	state    changes.StateStore
	// stamps are the modification times of work items and users, which
	// Karbon does not publish.
	stamps  *stamps.Store
	rails   xero.Rails
	changes changes.ChangeSink
	deps    upstream.Deps
	inbox   notifications.Inbox
	// one lets one drain of its notifications run at a time here.
	one      notifications.One
	details  *detailCache
	settings upstream.Cached[[]workStatus]
	users    upstream.Cached[*directory]
	// dir and looked find clients for the firm's other systems
	// (resolve.go).
	dir    clientDirectory
	looked resolutions
	// ledger says the firm's invoices are Karbon's: its Invoice
	// webhooks are read; otherwise they are acknowledged unread.
	ledger bool
	// role is what the adapter is to the firm (records, ledger), whose
	// notifications it keeps apart.
	role string
	// clients links the invoices of Karbon's billing as the firm's
	// ledger to the firm's records system's clients; nil when linking
	// is off (invoices name no client) or Karbon is the records system.
	clients linking.Linker
}

// Option changes New.
type Option func(*Adapter)

// AsLedger makes the adapter keep the firm's invoices: Karbon's billing is
// the firm's ledger, and its Invoice notifications are read.
func AsLedger() Option { return func(a *Adapter) { a.ledger = true } }

// InRole names what the adapter is to the firm (records, the default, or
// ledger): the two keep their notifications apart, each read by its own
// sync.
func InRole(role string) Option { return func(a *Adapter) { a.role = role } }

// WithClientLinker links the invoices of Karbon's billing, in the ledger
// role, to the firm's records system's clients through l (linking's
// rule): the same practice's Karbon records keep the Karbon client, any
// other records system names its own client for it, or none.
func WithClientLinker(l linking.Linker) Option { return func(a *Adapter) { a.clients = l } }

// heard tells the deps when a notification that led to a change came.
func (a *Adapter) heard(at time.Time) {
	if a.deps.Heard != nil && !at.IsZero() {
		a.deps.Heard(at)
	}
}

// New checks cfg and makes the adapter.
func New(cfg Config, deps upstream.Deps, opts ...Option) (*Adapter, error) {
	if cfg.AccessKey == "" || cfg.Bearer == "" {
		return nil, fmt.Errorf("karbon: access_key and bearer are both required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.karbonhq.com"
	}
	if cfg.PageSize <= 0 || cfg.PageSize > 100 {
		cfg.PageSize = 100
	}
	if cfg.ClientGroupType == "" {
		cfg.ClientGroupType = "company"
	}
	if !contains(practice.ClientTypes, cfg.ClientGroupType) {
		return nil, fmt.Errorf("karbon: client_group_type %q must be one of %v", cfg.ClientGroupType, practice.ClientTypes)
	}
	if cfg.DefaultCountry == "" {
		cfg.DefaultCountry = "GB"
	}
	if cfg.DetailConcurrency <= 0 {
		cfg.DetailConcurrency = 4
	}
	if cfg.WebhookSignatureHeader == "" {
		cfg.WebhookSignatureHeader = "Signature"
	}
	if cfg.WebhookTimeout <= 0 {
		cfg.WebhookTimeout = upstream.Duration(5 * time.Second)
	}
	if cfg.WebhookMaxRecords <= 0 {
		cfg.WebhookMaxRecords = 1000
	}
	stages, err := newStageMap(cfg.StageMap)
	if err != nil {
		return nil, err
	}
	statuses, err := clientStatuses(cfg.ClientStatuses)
	if err != nil {
		return nil, err
	}
	rails, err := newRails(cfg.SettlementRails)
	if err != nil {
		return nil, fmt.Errorf("karbon: %w", err)
	}
	c, err := newKeyClient(upstream.Options{
		System:   "karbon",
		BaseURL:  cfg.BaseURL,
		Policy:   cfg.Upstream,
		Defaults: upstream.Policy{RateLimit: 120, RatePeriod: upstream.Duration(time.Minute)},
		Account:  cfg.AccessKey,
	}, cfg.Bearer, cfg.AccessKey, deps)
	if err != nil {
		return nil, fmt.Errorf("karbon: %w", err)
	}
	state := deps.StateStore()
	a := &Adapter{
		cfg:      cfg,
		c:        c,
		log:      deps.LoggerOrNop().With(zap.String("upstream", c.Label())),
		clock:    deps.ClockOrSystem(),
		statuses: statuses,
		rec:      deps.ChangeRecorder(),
		state:    state,
		stamps:   stamps.New(state, deps.ClockOrSystem(), "karbon", cfg.Firm),
		rails:    rails,
		changes:  deps.Changes,
		deps:     deps,
		inbox:    deps.NotificationInbox(),
		details:  newDetailCache(10000),
		role:     "records",
	}
	a.stages.Store(stages)
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

// serves reports whether t is a tenant this adapter holds records for: its
// firm's live records. Sandbox tenants have seeded records elsewhere.
func (a *Adapter) serves(t practice.Tenant) bool {
	return !t.Sandbox && (a.cfg.Firm == "" || t.Firm == a.cfg.Firm)
}

func (a *Adapter) tenant() practice.Tenant { return practice.Tenant{Firm: a.cfg.Firm} }

// List returns one page of clients, jobs, people or invoices; other kinds
// are empty.
func (a *Adapter) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if !a.serves(t) {
		return practice.Page{}, fmt.Errorf("karbon: no records for %s: %w", t, practice.ErrNotFound)
	}
	cur, err := paging.DecodeCursor(q.Cursor)
	if err != nil {
		return practice.Page{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	switch k {
	case practice.Clients:
		return a.listClients(ctx, q.Filter, cur, limit)
	case practice.Jobs:
		return a.listJobs(ctx, q.Filter, cur, limit)
	case practice.People:
		return a.listPeople(ctx, q.Filter, cur, limit)
	case practice.Invoices:
		return a.listInvoices(ctx, q.Filter, cur, limit)
	}
	return practice.Page{Items: []json.RawMessage{}}, nil
}

// Get returns one client, job, person or invoice.
func (a *Adapter) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, practice.ErrNotFound)
	}
	switch k {
	case practice.Clients:
		ref, ok := parseClientID(id)
		if !ok {
			return nil, notFound(k, id)
		}
		return a.getClient(ctx, ref)
	case practice.Jobs:
		key, ok := parseKey(id, "job_")
		if !ok {
			return nil, notFound(k, id)
		}
		return a.getJob(ctx, key)
	case practice.People:
		key, ok := parseKey(id, "usr_")
		if !ok {
			return nil, notFound(k, id)
		}
		return a.getPerson(ctx, key)
	case practice.Invoices:
		key, ok := parseKey(id, "inv_")
		if !ok {
			return nil, notFound(k, id)
		}
		return a.getInvoice(ctx, key)
	}
	return nil, notFound(k, id)
}

func notFound(k practice.Kind, id string) error {
	return fmt.Errorf("karbon: no %s %q: %w", k.Singular(), id, practice.ErrNotFound)
}

// getJSON reads one Karbon resource.
func (a *Adapter) getJSON(ctx context.Context, path, what string, v any) error {
	_, err := a.c.JSON(ctx, upstream.Request{Method: http.MethodGet, Path: path}, what, v)
	return err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// norm makes a status or type name comparable: lower case, single spaces.
func norm(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

var (
	_ practice.Reader       = (*Adapter)(nil)
	_ practice.ClientWriter = (*Adapter)(nil)
	_ practice.JobWriter    = (*Adapter)(nil)
)

// Upstream is the adapter's resilient client, for readiness reports.
func (a *Adapter) Upstream() *upstream.Client { return a.c }

// Incremental tells the read model's sync which kinds Karbon can list by
// modification time: clients (contacts, organizations and client groups
// carry LastModifiedDateTime; a poll reads contacts and organizations
// newest first, a page of each when nothing changed, and the client
// groups' list, and each record in full only when it changed) and
// invoices (UpdatedAt, read most recently updated first). Work
// items and users carry no modification time; Karbon's webhooks and the
// reconciliation keep them current, and polling them would read every
// page to find nothing.
func (a *Adapter) Incremental(k practice.Kind) bool {
	return k == practice.Clients || k == practice.Invoices
}
