// Package xpm serves a firm's clients, jobs, people, invoices and
// engagements (its quotes) from its Xero Practice Manager (XPM API v3.1, JSON), and translates client and
// job writes to XPM's. XPM sends no webhooks: change data comes from the
// gateway's synchronizer polling List with updated_since, so List pushes
// that filter down wherever XPM takes one and reads as few XPM lists as
// it can.
//
// Each /v1 record is built from XPM's published shapes:
//
//   - client: id cli_<uuid>; status archived (isArchived), prospect
//     (isProspect) or active; type from businessStructure (else
//     individual when the client has a first or last name, company
//     otherwise); owner the account manager, else the job manager;
//     contacts its contacts that are not deleted; country from the
//     country name (Config.DefaultCountry when XPM names none).
//   - job: id job_<job number>; stage from the job state
//     (Config.StageMap); owner the job's manager, else its partner;
//     deadline the due date; closed_at the completed date of a closed
//     job; created_at the start date.
//   - person: id usr_<uuid>, a staff member.
//   - invoice: id inv_<invoice number>; Draft draft, Approved issued (or
//     partially_paid), Paid paid, Cancelled void; an invoice with nothing
//     outstanding is paid, and its payments decide paid_at (the latest)
//     and settled_via (the words of its reference, Config.SettlementRails);
//     amounts in Config.Currency, which XPM does not name.
//   - engagement: id eng_<quote number>, a quote (adapters/kit/proposals):
//     Draft proposed, Issued sent, Accepted signed, Declined declined,
//     Archived ended; scope the quote's name and its tasks' names; fee its
//     amount including tax in Config.Currency; billing fixed (estimate
//     for an estimate); signed_at when a gateway first read it accepted.
//     XPM publishes no link from a quote to the jobs made for it (only
//     job.api/createquote's answer names the quote made from a job), so
//     released_jobs is [].
//
// XPM publishes no modification or creation time on any of them, so the
// gateway stamps records as it reads them (practice/stamps): updated_at,
// last_activity_at and version are when a gateway first read the record
// as it is now.
//
// Listing, per kind:
//
//   - clients: client.api/list, one call with every client and its
//     contacts; updated_since goes to XPM as modifiedSince (in
//     Config.TimeZone, less Config.ModifiedOverlap for clocks that
//     disagree), so a poll reads only the clients that changed. XPM's
//     paged-list omits contacts and archived clients, so it cannot make
//     a client record.
//   - jobs: job.api/current, then job.api/list for each year of
//     Config.HistoryYears by creation date (XPM's only date range, and
//     at most a year a call), less the current jobs; a client filter
//     reads job.api/client/{uuid} alone.
//   - invoices: invoice.api/current, invoice.api/draft, then
//     invoice.api/list for each year of Config.HistoryYears, less those
//     already read.
//   - people: staff.api/list.
//   - engagements: quote.api/current, quote.api/draft, then
//     quote.api/list for each year of Config.HistoryYears, every one
//     detailed (the tasks make the scope), less those already read.
//
// Lists XPM does not page are read whole and walked in id order (one call
// per /v1 page); every filter XPM cannot take is applied here.
package xpm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Config is one firm's Xero Practice Manager. Secrets may hold {env.X}
// placeholders, which the caller expands before New.
type Config struct {
	// Firm is the firm these records belong to (set by the wiring from the
	// enclosing firm block).
	Firm string `json:"firm,omitempty"`
	// TenantID is the Xero organisation of the practice, sent as the
	// xero-tenant-id header. Required.
	TenantID string `json:"tenant_id"`
	// OAuth2 gets the bearer token from Xero's identity service, as for
	// the Xero ledger: a custom connection's client id and secret, an
	// app's client id, secret and refresh token, or a fixed
	// access_token. Scopes practicemanager (or the narrower
	// practicemanager.* ones). The token URL defaults to
	// https://identity.xero.com/connect/token, client authentication to
	// HTTP Basic.
	OAuth2 upstream.OAuth2Config `json:"oauth2"`
	// BaseURL is the API [https://api.xero.com/practicemanager].
	BaseURL string `json:"base_url,omitempty"`

	// StageMap maps XPM job states to job stages, over what the states'
	// names suggest (practice.SuggestStage: "In Review" and "Manager
	// review" in_review, "Awaiting info" awaiting_client, Lodged filed,
	// ...); a state mapped to "" maps to nothing. Case, spacing and
	// punctuation do not matter. A state that maps to nothing reads as
	// in_progress, completed once XPM gives the job a completed date. A
	// stage move writes the first state in XPM's own order
	// (jobstate.api/list) that maps to the stage, and a stage none maps
	// to is refused (invalid_stage, naming the stages that do).
	StageMap map[string]string `json:"stage_map,omitempty"`
	// TimeZone is the practice's IANA zone, in which XPM writes and reads
	// times [UTC].
	TimeZone string `json:"time_zone,omitempty"`
	// ModifiedOverlap is taken off updated_since before it goes to XPM,
	// for XPM's clock and ours disagreeing [2m].
	ModifiedOverlap upstream.Duration `json:"modified_overlap,omitempty"`
	// DefaultCountry is the country of clients whose address names none
	// [GB].
	DefaultCountry string `json:"default_country,omitempty"`
	// Currency is the currency of the practice's invoices, which XPM does
	// not name [GBP].
	Currency string `json:"currency,omitempty"`
	// HistoryYears is how many years of closed jobs and archived invoices
	// lists read, by creation or invoice date [1].
	HistoryYears int `json:"history_years,omitempty"`
	// SettlementRails maps words in a payment's reference to the
	// settled_via rail, over the Xero ledger's defaults.
	SettlementRails map[string]string `json:"settlement_rails,omitempty"`
	// NoteFolder is the folder of the job note a stage move's note is
	// written as; empty leaves XPM's default.
	NoteFolder string `json:"note_folder,omitempty"`
	// MaxScanPages bounds the XPM lists one List reads [10].
	MaxScanPages int `json:"max_scan_pages,omitempty"`
	// Upstream is the resilience policy; the budget defaults to Xero's
	// published 60 calls a minute per organisation, and 5,000 a day,
	// shared with the Xero ledger of the same organisation.
	Upstream upstream.Policy `json:"upstream,omitzero"`
}

// Adapter is one firm's XPM. It is safe for concurrent use.
type Adapter struct {
	cfg    Config
	c      *upstream.Client
	log    *zap.Logger
	clock  upstream.Clock
	loc    *time.Location
	stages atomic.Pointer[stageMap]
	rails  xero.Rails
	stamps *stamps.Store
	// signings remember when each quote was first read accepted.
	signings proposals.Signings
	state    changes.StateStore
	rec      *changes.Recorder
	changes  changes.ChangeSink
	states   upstream.Cached[[]party]
	cats     upstream.Cached[[]party]
	names    upstream.Cached[*linking.Directory]
}

// New checks cfg and makes the adapter.
func New(cfg Config, deps upstream.Deps) (*Adapter, error) {
	if cfg.TenantID == "" {
		return nil, fmt.Errorf("xpm: tenant_id is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.xero.com/practicemanager"
	}
	if cfg.TimeZone == "" {
		cfg.TimeZone = "UTC"
	}
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("xpm: time_zone %q: %w", cfg.TimeZone, err)
	}
	if cfg.ModifiedOverlap == 0 {
		cfg.ModifiedOverlap = upstream.Duration(2 * time.Minute)
	}
	if cfg.DefaultCountry == "" {
		cfg.DefaultCountry = "GB"
	}
	if len(cfg.DefaultCountry) != 2 {
		return nil, fmt.Errorf("xpm: default_country %q must be an ISO 3166-1 alpha-2 code such as GB", cfg.DefaultCountry)
	}
	if cfg.Currency == "" {
		cfg.Currency = "GBP"
	}
	if len(cfg.Currency) != 3 {
		return nil, fmt.Errorf("xpm: currency %q must be an ISO 4217 code such as GBP", cfg.Currency)
	}
	if cfg.HistoryYears <= 0 {
		cfg.HistoryYears = 1
	}
	if cfg.HistoryYears > 20 {
		return nil, fmt.Errorf("xpm: history_years %d: at most 20", cfg.HistoryYears)
	}
	stages, err := newStageMap(cfg.StageMap)
	if err != nil {
		return nil, err
	}
	rails, err := xero.NewRails(cfg.SettlementRails)
	if err != nil {
		return nil, fmt.Errorf("xpm: %w", err)
	}
	// The same Xero identity app as the ledger's: a refresh token Xero
	// rotates is kept under the one key both find.
	auth, err := oauthtoken.New(oauthtoken.Xero, cfg.OAuth2, "https://identity.xero.com/connect/token", "basic", deps)
	if err != nil {
		return nil, fmt.Errorf("xpm: %w", err)
	}
	c, err := upstream.NewClient(upstream.Options{
		System:   "xpm",
		BaseURL:  cfg.BaseURL,
		Policy:   cfg.Upstream,
		Defaults: upstream.Policy{RateLimit: 60, RatePeriod: upstream.Duration(time.Minute)},
		Auth:     tenantAuth{auth, cfg.TenantID},
		// Xero's limits are the organisation's, whichever of its APIs
		// spends them: this names the Xero ledger's budget.
		BudgetSystem: "xero",
		Account:      cfg.TenantID,
		Allowances:   []upstream.Allowance{xero.DailyAllowance},
	}, deps)
	if err != nil {
		return nil, fmt.Errorf("xpm: %w", err)
	}
	state := deps.StateStore()
	a := &Adapter{
		cfg:      cfg,
		c:        c,
		log:      deps.LoggerOrNop().With(zap.String("upstream", c.Label())),
		clock:    deps.ClockOrSystem(),
		loc:      loc,
		rails:    rails,
		stamps:   stamps.New(state, deps.ClockOrSystem(), "xpm", cfg.Firm),
		signings: proposals.Signings{State: state, Firm: cfg.Firm},
		state:    state,
		rec:      deps.ChangeRecorder(),
		changes:  deps.Changes,
	}
	a.stages.Store(stages)
	return a, nil
}

// tenantAuth adds the organisation header to the bearer token.
type tenantAuth struct {
	// The Source, not any Authorizer: its Rejected drops a token the API answers 401 to.
	*oauthtoken.Source
	tenant string
}

func (t tenantAuth) Authorize(ctx context.Context, h http.Header) error {
	h.Set("xero-tenant-id", t.tenant)
	return t.Source.Authorize(ctx, h)
}

// serves reports whether t is a tenant this adapter holds records for: its
// firm's live records. Sandbox tenants have seeded records elsewhere.
func (a *Adapter) serves(t practice.Tenant) bool {
	return !t.Sandbox && (a.cfg.Firm == "" || t.Firm == a.cfg.Firm)
}

func (a *Adapter) tenant() practice.Tenant { return practice.Tenant{Firm: a.cfg.Firm} }

// Get returns one client, job, person, invoice or engagement.
func (a *Adapter) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("xpm: no records for %s: %w", t, practice.ErrNotFound)
	}
	key, ok := parseID(k, id)
	if !ok {
		return nil, notFound(k, id)
	}
	switch k {
	case practice.Clients:
		return a.getClient(ctx, key)
	case practice.Jobs:
		return a.getJob(ctx, key)
	case practice.People:
		return a.getPerson(ctx, key)
	case practice.Invoices:
		return a.getInvoice(ctx, key)
	case practice.Engagements:
		return a.getQuote(ctx, key)
	}
	return nil, notFound(k, id)
}

func notFound(k practice.Kind, id string) error {
	return fmt.Errorf("xpm: no %s %q: %w", k.Singular(), id, practice.ErrNotFound)
}

// XPM's identifiers: uuids for clients and staff, job and invoice numbers
// (J000123, or a firm's own) for jobs and invoices.
var (
	uuidRE   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	numberRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// parseID takes XPM's identifier out of one of ours.
func parseID(k practice.Kind, id string) (string, bool) {
	key, ok := strings.CutPrefix(id, k.IDPrefix())
	if !ok || k.IDPrefix() == "" {
		return "", false
	}
	switch k {
	case practice.Clients, practice.People:
		return key, uuidRE.MatchString(key)
	case practice.Jobs, practice.Invoices, practice.Engagements:
		return key, numberRE.MatchString(key)
	}
	return "", false
}

// xpmAnswer is every answer's status.
type xpmAnswer interface{ status() *answer }

func (a *answer) status() *answer { return a }

// read makes a GET and decodes its answer. XPM's refusals of a read (a
// 4xx other than 404, or an answer whose status is ERROR) are nothing
// the API's caller can fix: the practice's connection is at fault, so
// they read as unavailable; an answer we cannot read is a bad upstream.
func (a *Adapter) read(ctx context.Context, path string, q url.Values, what string, v xpmAnswer) error {
	_, err := a.c.JSON(ctx, upstream.Request{Path: path, Query: q}, what, v)
	var s *practice.StatusError
	switch {
	case errors.As(err, &s) && s.Status >= 400 && s.Status < 500 && s.Status != http.StatusNotFound && s.Status != http.StatusGone:
		return &practice.UnavailableError{Upstream: a.c.Label(), RetryAfter: s.RetryAfter, Err: err}
	case err != nil:
		return fmt.Errorf("xpm: read %s: %w", what, err)
	}
	return a.refused(v.status(), what, false)
}

// refused turns an answer whose status is not OK into an error: not found
// when XPM says so, a parameter_invalid on a write, else unavailable.
func (a *Adapter) refused(st *answer, what string, write bool) error {
	if st.Status == "" || strings.EqualFold(st.Status, "OK") {
		return nil
	}
	desc := st.ErrorDescription
	if desc == "" {
		desc = "status " + st.Status
	}
	switch {
	case strings.Contains(strings.ToLower(desc), "not found"):
		return fmt.Errorf("xpm: %s: %s: %w", what, desc, practice.ErrNotFound)
	case write:
		return &practice.InvalidError{Code: "parameter_invalid", Param: paramOf(what),
			Message: "Xero Practice Manager refused the " + what + ": " + desc}
	}
	return &practice.UnavailableError{Upstream: a.c.Label(), Err: fmt.Errorf("%s: %s", what, desc)}
}

var (
	_ practice.Reader       = (*Adapter)(nil)
	_ practice.ClientWriter = (*Adapter)(nil)
	_ practice.JobWriter    = (*Adapter)(nil)
	_ linking.Linker        = (*Adapter)(nil)
)

// Upstream is the adapter's resilient client, for readiness reports.
func (a *Adapter) Upstream() *upstream.Client { return a.c }
