// Package quickbooks serves a firm's invoices from its QuickBooks Online
// company (Accounting API v3) as the read-only practice view of
// /v1/invoices, and its estimates as /v1/engagements when they are the
// firm's engagements (estimate.go), keeps the read model current through QuickBooks' change
// data capture and turns its webhooks into change records. The ledger stays
// the system of record: this package never writes to QuickBooks.
//
// An invoice is QuickBooks' Invoice with id inv_qb-<Id>. Its status is
// void when QuickBooks voided it (status Voided, or zeroed with the note
// "Voided"), paid when its Balance is zero, partially_paid when a part is,
// else issued; QuickBooks keeps no draft invoices. Amounts are the
// schema's decimals with two places, never through a float. paid_at and
// settled_via come from the latest Payment linked to it (its payment
// method's name, reference and note through the settlement rails). The
// client is the records system's client for the customer when a
// ClientResolver links them, else cli_qb-<CustomerRef>.
//
// Reads: the backfill and reconciliation query `select * from Invoice
// STARTPOSITION n MAXRESULTS 1000`, with the Payments the page's paid
// invoices name in one query more; the sync then follows change data
// capture (Changes): one GET .../cdc a poll for invoices, estimates and
// payments,
// never a full query again until the daily reconciliation. QuickBooks'
// limits are kept per company: 500 requests a minute, 10 a second, 10 at
// once; a 429 stops every call for 60 s.
package quickbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Intuit's published endpoints and limits.
const (
	DefaultBaseURL  = "https://quickbooks.api.intuit.com"
	DefaultTokenURL = "https://oauth.platform.intuit.com/oauth2/v1/tokens/bearer"
	// Scope is what a connection asks Intuit for.
	Scope = "com.intuit.quickbooks.accounting"
	// minorVersion is the one Intuit answers as since August 2025,
	// whatever a request asks.
	minorVersion = "75"
	// maxResults is the most rows a query answers.
	maxResults = 1000
	// cdcLookBack is how far back change data capture reaches; a
	// checkpoint older than that is reconciled instead.
	cdcLookBack = 30 * 24 * time.Hour
	// cdcOverlap is how far before the last answer's time the next CDC
	// call asks from, so that a change committed as it answered is not
	// passed over; records seen again unchanged cost nothing.
	cdcOverlap = time.Minute
)

// Config is one firm's QuickBooks Online company. Secrets may hold
// {env.X} placeholders, which the caller expands before New.
type Config struct {
	// Firm is the firm these records belong to (set by the wiring).
	Firm string `json:"firm,omitempty"`
	// RealmID is the company, in every path and in webhook events.
	// Required.
	RealmID string `json:"realm_id"`
	// OAuth2 gets the bearer token: the app's client id and secret and a
	// refresh token, which Intuit rotates (the newest is kept sealed in
	// the upstream state store), or a fixed access_token. The token URL
	// defaults to Intuit's, client authentication to HTTP Basic. Its
	// options are also read at the top of the Caddyfile block.
	OAuth2 upstream.OAuth2Config `json:"oauth2"`
	// BaseURL is the API [https://quickbooks.api.intuit.com]; the
	// sandbox is https://sandbox-quickbooks.api.intuit.com.
	BaseURL string `json:"base_url,omitempty"`
	// VerifierToken is the app's webhook verifier token: Intuit sends
	// the base64 HMAC-SHA256 of each body under it in intuit-signature.
	// Without it every webhook is refused.
	VerifierToken string `json:"verifier_token,omitempty"`
	// WebhookTimeout is how long one webhook delivery reads what it
	// named before it is answered; Intuit wants an answer within 3 s
	// [2s]. The rest is read after, by the sync, within the company's
	// 10 calls a second.
	WebhookTimeout upstream.Duration `json:"webhook_timeout,omitempty"`
	// WebhookMaxRecords bounds the entities one delivery keeps for
	// reading [1000]; the rest are left to change data capture.
	WebhookMaxRecords int `json:"webhook_max_records,omitempty"`
	// SettlementRails maps words in a payment's method, reference or
	// note to the settled_via rail, over the defaults (card, credit card
	// and the card schemes, ach, e-check, check, cash, wire, transfer,
	// stripe, paypal, ...). A payment matching none is a bank_transfer.
	SettlementRails map[string]string `json:"settlement_rails,omitempty"`
	// RateLimitedWait is how long a 429 stops every call [60s, Intuit's].
	RateLimitedWait upstream.Duration `json:"rate_limited_wait,omitempty"`
	// MaxScanPages bounds the query pages one List reads [10].
	MaxScanPages int `json:"max_scan_pages,omitempty"`
	// Upstream is the resilience policy. The budget defaults to Intuit's
	// 500 requests a minute per company (and 10 a second beside it);
	// daily_limit is the reads a day the sync plans its polls within
	// [2,000]: Intuit meters reads by the app's plan rather than refusing
	// them, so it refuses no call.
	Upstream upstream.Policy `json:"upstream,omitzero"`
}

// Option changes New.
type Option func(*Adapter)

// WithEngagements says whether the company's estimates are the firm's
// engagements now (they are without it): only then does change data
// capture ask for estimates and do webhooks record them.
func WithEngagements(keeps func() bool) Option { return func(a *Adapter) { a.engagements = keeps } }

// WithClientLinker links invoices and estimates to the practice's
// clients (the firm's records system, by linking's rule).
func WithClientLinker(l linking.Linker) Option { return func(a *Adapter) { a.clients = l } }

// Adapter is one firm's QuickBooks company. It is safe for concurrent use.
type Adapter struct {
	cfg     Config
	c       *upstream.Client
	auth    *oauthtoken.Source
	log     *zap.Logger
	clock   upstream.Clock
	rails   xero.Rails
	clients linking.Linker
	rec     *changes.Recorder
	deps    upstream.Deps
	inbox   notifications.Inbox
	// one lets one drain of its notifications run at a time here.
	one     notifications.One
	refused func(string)
	prefix  string // /v3/company/<realm>

	// last is the last query page read: the sync reads a page of 1,000
	// in parts of 200, and each part would read it again.
	mu            sync.Mutex
	lastInvoices  *cachedPage[invoicePage]
	lastEstimates *cachedPage[estimatePage]

	// signings remember when each estimate was first read accepted.
	signings proposals.Signings
	// stamps move an invoice's version when what is read apart from it
	// (its client, linked from the records system; its payments) changes
	// under the same LastUpdatedTime.
	stamps *stamps.Store
	// engagements says whether estimates are the firm's engagements.
	engagements func() bool
}

// keepsEngagements reports whether the company's estimates are the firm's
// engagements.
func (a *Adapter) keepsEngagements() bool { return a.engagements == nil || a.engagements() }

// cachedPage is the last page one query statement read.
type cachedPage[P any] struct {
	query string
	at    time.Time
	page  P
}

// pageTTL is how long a query page read serves the parts that follow.
const pageTTL = 30 * time.Second

// queryStatement selects the page of entity from start (1-based), those
// changed since since when it is set.
func queryStatement(entity string, since time.Time, start int) string {
	stmt := "select * from " + entity
	if !since.IsZero() {
		stmt += " where MetaData.LastUpdatedTime >= '" + since.UTC().Format(time.RFC3339) + "'"
	}
	return stmt + fmt.Sprintf(" STARTPOSITION %d MAXRESULTS %d", start, maxResults)
}

// cachedQuery answers stmt's page as *last holds it when it was read
// within pageTTL, else reads it and keeps it there.
func cachedQuery[P any](a *Adapter, last **cachedPage[P], stmt string, read func() (P, error)) (P, error) {
	now := a.clock.Now()
	a.mu.Lock()
	if l := *last; l != nil && l.query == stmt && now.Sub(l.at) < pageTTL && !now.Before(l.at) {
		a.mu.Unlock()
		return l.page, nil
	}
	a.mu.Unlock()
	p, err := read()
	if err != nil {
		return p, err
	}
	a.mu.Lock()
	*last = &cachedPage[P]{query: stmt, at: now, page: p}
	a.mu.Unlock()
	return p, nil
}

// PerSecond and DailyReads are Intuit's 10 requests a second per company
// beside its 500 a minute, and the reads a day the sync plans for by
// default (Intuit meters reads: the Builder plan has 500,000 a month for
// every company of the app).
var (
	PerSecond  = upstream.Allowance{Limit: 10, Per: time.Second}
	DailyReads = upstream.Allowance{Limit: 2000, Per: 24 * time.Hour}
)

// qbRails are the words of US payments beside the defaults every ledger
// shares.
var qbRails = map[string]string{
	"cash": "cash", "credit card": "card", "debit card": "card", "visa": "card", "mastercard": "card",
	"amex": "card", "american express": "card", "discover": "card", "e-check": "ach", "echeck": "ach",
	"wire": "bank_transfer", "eft": "bank_transfer", "zelle": "bank_transfer",
}

// New checks cfg and makes the adapter.
func New(cfg Config, deps upstream.Deps, opts ...Option) (*Adapter, error) {
	if cfg.RealmID == "" || strings.ContainsAny(cfg.RealmID, "/?#% ") {
		return nil, fmt.Errorf("quickbooks: realm_id is required: the company's id, digits")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.WebhookTimeout <= 0 {
		cfg.WebhookTimeout = upstream.Duration(2 * time.Second)
	}
	if cfg.WebhookMaxRecords <= 0 {
		cfg.WebhookMaxRecords = 1000
	}
	if cfg.RateLimitedWait <= 0 {
		cfg.RateLimitedWait = upstream.Duration(time.Minute)
	}
	auth, err := oauthtoken.New(oauthtoken.Intuit, cfg.OAuth2, DefaultTokenURL, "basic", deps)
	if err != nil {
		return nil, err
	}
	words := map[string]string{}
	for k, v := range qbRails {
		words[k] = v
	}
	for k, v := range cfg.SettlementRails {
		words[k] = v
	}
	rails, err := xero.NewRails(words)
	if err != nil {
		return nil, fmt.Errorf("quickbooks: %w", err)
	}
	// daily_limit plans reads rather than refusing them: it is taken
	// out of the policy the client enforces.
	policy, metered := cfg.Upstream, []upstream.Allowance{DailyReads}
	switch {
	case policy.DailyLimit > 0:
		metered = []upstream.Allowance{{Limit: policy.DailyLimit, Per: 24 * time.Hour}}
	case policy.DailyLimit < 0:
		metered = nil
	}
	policy.DailyLimit = 0
	c, err := upstream.NewClient(upstream.Options{
		System:          "quickbooks",
		BaseURL:         cfg.BaseURL,
		Policy:          policy,
		Defaults:        upstream.Policy{RateLimit: 500, RatePeriod: upstream.Duration(time.Minute)},
		Auth:            auth,
		Account:         cfg.RealmID,
		Allowances:      []upstream.Allowance{PerSecond},
		Metered:         metered,
		MaxConcurrent:   10,
		RateLimitedWait: time.Duration(cfg.RateLimitedWait),
	}, deps)
	if err != nil {
		return nil, fmt.Errorf("quickbooks: %w", err)
	}
	a := &Adapter{
		cfg:      cfg,
		c:        c,
		auth:     auth,
		log:      deps.LoggerOrNop().With(zap.String("upstream", c.Label())),
		clock:    deps.ClockOrSystem(),
		rails:    rails,
		rec:      deps.ChangeRecorder(),
		deps:     deps,
		inbox:    deps.NotificationInbox(),
		refused:  deps.GrantRefused,
		prefix:   "/v3/company/" + url.PathEscape(cfg.RealmID),
		signings: proposals.Signings{State: deps.StateStore(), Firm: cfg.Firm},
		stamps:   stamps.New(deps.StateStore(), deps.ClockOrSystem(), "quickbooks", cfg.Firm),
	}
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

// Upstream is the adapter's resilient client, for readiness reports.
func (a *Adapter) Upstream() *upstream.Client { return a.c }

// RealmID is the company the adapter reads.
func (a *Adapter) RealmID() string { return a.cfg.RealmID }

func (a *Adapter) serves(t practice.Tenant) bool {
	return !t.Sandbox && (a.cfg.Firm == "" || t.Firm == a.cfg.Firm)
}

// get makes a read of the company's API and decodes its answer. A refused
// answer becomes a *FaultError carrying none of the vendor's text; an
// AuthenticationFault is asked once more with a fresh token (the first
// was dropped by the token source), and a second one means the company
// no longer takes the app's grant.
func (a *Adapter) get(ctx context.Context, path string, q url.Values, what string) (response, error) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("minorversion", minorVersion)
	r := upstream.Request{Path: a.prefix + path, Query: q}
	resp, err := a.c.Do(ctx, r)
	if isStatus(err, http.StatusUnauthorized) && a.cfg.OAuth2.RefreshGrant() {
		resp, err = a.c.Do(ctx, r)
		if isStatus(err, http.StatusUnauthorized) {
			f := faultOf(http.StatusUnauthorized, statusBody(err))
			f.Reconnect = true
			if a.refused != nil {
				a.refused("QuickBooks refused a token just refreshed (AuthenticationFault): the connection must be reconnected")
			}
			return response{}, fmt.Errorf("quickbooks: %s: %w", what, f)
		}
	}
	if err != nil {
		var s *practice.StatusError
		if errors.As(err, &s) && s.Status != http.StatusTooManyRequests && s.Status < 500 {
			return response{}, fmt.Errorf("quickbooks: %s: %w", what, faultOf(s.Status, s.Body))
		}
		return response{}, fmt.Errorf("quickbooks: %s: %w", what, scrub(err))
	}
	body, err := decode(resp.Body)
	if err != nil {
		return response{}, upstream.Malformed(a.c.Label(), what, err)
	}
	if body.Fault != nil {
		return response{}, fmt.Errorf("quickbooks: %s: %w", what, faultOf(resp.Status, resp.Body))
	}
	return body, nil
}

// scrub keeps a refused answer's body (the vendor's text) out of an
// error that reaches /readyz and the sync's status.
func scrub(err error) error {
	var s *practice.StatusError
	if errors.As(err, &s) {
		s.Body = nil
	}
	return err
}

func isStatus(err error, status int) bool {
	var s *practice.StatusError
	return errors.As(err, &s) && s.Status == status
}

func statusBody(err error) []byte {
	var s *practice.StatusError
	if errors.As(err, &s) {
		return s.Body
	}
	return nil
}

// invoicePage is a query page of invoices with the payments its paid
// invoices name.
type invoicePage struct {
	invoices []invoice
	payments map[string]*payment
	full     bool // the page held maxResults rows: another may follow
}

// List returns a page of invoices or of estimates (engagements); other
// kinds are empty.
func (a *Adapter) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if !a.serves(t) {
		return practice.Page{}, fmt.Errorf("quickbooks: no records for %s: %w", t, practice.ErrNotFound)
	}
	cur, err := paging.DecodeCursor(q.Cursor)
	if err != nil {
		return practice.Page{}, err
	}
	if k == practice.Engagements {
		return a.listEstimates(ctx, t, q, cur)
	}
	if k != practice.Invoices {
		return practice.Page{Items: []json.RawMessage{}}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	since := q.Filter.UpdatedSince
	pages := map[string]invoicePage{}
	w := paging.Walk[invoice]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[invoice], error) {
			start := 1
			if token != "" {
				n, err := strconv.Atoi(token)
				if err != nil || n < 1 {
					return paging.VendorPage[invoice]{}, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
						Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
				}
				start = n
			}
			p, err := a.queryInvoices(ctx, since, start)
			if err != nil {
				return paging.VendorPage[invoice]{}, err
			}
			pages[token] = p
			vp := paging.VendorPage[invoice]{Items: p.invoices}
			if p.full {
				vp.Next = strconv.Itoa(start + len(p.invoices))
			}
			return vp, nil
		},
		ID: func(inv invoice) string { return inv.ID },
		Convert: func(ctx context.Context, invs []paging.Found[invoice]) ([]json.RawMessage, error) {
			payments := map[string]*payment{}
			for _, p := range pages {
				for id, pay := range p.payments {
					payments[id] = pay
				}
			}
			return paging.Each(ctx, 1, len(invs), func(ctx context.Context, i int) (json.RawMessage, error) {
				inv := &invs[i].Item
				raw, err := a.invoiceJSON(ctx, t, inv, payments)
				if err != nil && digitsOnly(inv.ID) {
					// A row that cannot be read is its invoice's alone.
					return nil, practice.Unusable(practice.Invoices, invoiceID(inv.ID), "the invoice", err)
				}
				return raw, err
			})
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// queryInvoices reads the page of invoices from start (1-based), and the
// payments of its paid invoices, or the same page read moments ago.
func (a *Adapter) queryInvoices(ctx context.Context, since time.Time, start int) (invoicePage, error) {
	stmt := queryStatement("Invoice", since, start)
	return cachedQuery(a, &a.lastInvoices, stmt, func() (invoicePage, error) {
		body, err := a.get(ctx, "/query", url.Values{"query": {stmt}}, "invoices")
		if err != nil {
			return invoicePage{}, err
		}
		var p invoicePage
		if body.QueryResponse != nil {
			p.invoices = body.QueryResponse.Invoice
		}
		p.full = len(p.invoices) == maxResults
		if p.payments, err = a.paymentsOf(ctx, p.invoices, nil); err != nil {
			return invoicePage{}, err
		}
		return p, nil
	})
}

// paymentsOf reads the payments that settled the paid invoices among
// invs, beside those already known, with as few queries as the ids need.
func (a *Adapter) paymentsOf(ctx context.Context, invs []invoice, known map[string]*payment) (map[string]*payment, error) {
	out := map[string]*payment{}
	for id, p := range known {
		out[id] = p
	}
	var want []string
	for i := range invs {
		if !paidOff(&invs[i]) {
			continue
		}
		for _, l := range invs[i].LinkedTxn {
			if l.TxnType == "Payment" && out[l.TxnID] == nil && digitsOnly(l.TxnID) && !slices.Contains(want, l.TxnID) {
				want = append(want, l.TxnID)
			}
		}
	}
	// Ids are digits (checked above), so they need no quoting beyond the
	// query language's own.
	const perQuery = 200
	for len(want) > 0 {
		n := min(len(want), perQuery)
		stmt := "select * from Payment where Id in ('" + strings.Join(want[:n], "','") + fmt.Sprintf("') MAXRESULTS %d", maxResults)
		want = want[n:]
		body, err := a.get(ctx, "/query", url.Values{"query": {stmt}}, "payments")
		if err != nil {
			return nil, err
		}
		if body.QueryResponse != nil {
			for i := range body.QueryResponse.Payment {
				p := &body.QueryResponse.Payment[i]
				out[p.ID] = p
			}
		}
	}
	return out, nil
}

// Get returns one invoice or engagement (estimate).
func (a *Adapter) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("quickbooks: no records for %s: %w", t, practice.ErrNotFound)
	}
	if qbID, ok := parseEngagementID(id); k == practice.Engagements && ok {
		return a.getEstimate(ctx, t, qbID)
	}
	invID, ok := parseID(id)
	if k != practice.Invoices || !ok {
		return nil, fmt.Errorf("quickbooks: no %s %q: %w", k.Singular(), id, practice.ErrNotFound)
	}
	inv, payments, err := a.readInvoice(ctx, invID)
	if err != nil {
		return nil, err
	}
	return a.invoiceJSON(ctx, t, &inv, payments)
}

// readInvoice reads an invoice and, when it is paid, its payments.
func (a *Adapter) readInvoice(ctx context.Context, invID string) (invoice, map[string]*payment, error) {
	body, err := a.get(ctx, "/invoice/"+invID, nil, "invoice "+invID)
	if err != nil {
		return invoice{}, nil, err
	}
	if body.Invoice == nil {
		return invoice{}, nil, upstream.Malformed(a.c.Label(), "invoice "+invID, errNoEntity)
	}
	payments, err := a.paymentsOf(ctx, []invoice{*body.Invoice}, nil)
	if err != nil {
		return invoice{}, nil, err
	}
	return *body.Invoice, payments, nil
}

// parseID takes QuickBooks' Id (digits) out of inv_qb-<Id>.
func parseID(id string) (string, bool) {
	n, ok := strings.CutPrefix(id, "inv_qb-")
	return n, ok && digitsOnly(n)
}

func invoiceID(qbID string) string { return "inv_qb-" + qbID }

var _ practice.Reader = (*Adapter)(nil)
