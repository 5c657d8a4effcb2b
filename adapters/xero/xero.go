// Package xero serves a firm's invoices from its Xero organisation (Xero
// Accounting API 2.0) as the read-only practice view of /v1/invoices, and
// its quotes as /v1/engagements when the firm's engagements come from its
// ledger (quote.go), and turns Xero's invoice webhooks into change
// records. The ledger stays the
// system of record: this package never writes to Xero.
//
// An invoice is Xero's sales invoice (Type ACCREC) with id
// inv_<InvoiceID>. Statuses map as DRAFT draft, SUBMITTED
// awaiting_approval, AUTHORISED issued (partially_paid once a payment or
// credit is allocated and something is still due), PAID paid, VOIDED and
// DELETED void. Amounts are Xero's decimals as strings with two places in
// the invoice's currency, never through a float. paid_at is
// FullyPaidOnDate; settled_via names the rail of the payment that settled
// it (Config.SettlementRails). Xero keeps no creation time: created_at is
// the invoice date. The client is the practice's client for the Xero
// contact, found in the firm's records system (linking's rule: Karbon's
// ExternalKey, else the contact's name), else null.
//
// Paging follows Xero's page parameter in InvoiceID (QuoteID) order, which
// edits do not reorder; updated_since goes to Xero as If-Modified-Since.
// Xero sends no webhook for quotes: they change by the sync's polls.
package xero

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Config is one firm's Xero organisation. Secrets may hold {env.X}
// placeholders, which the caller expands before New.
type Config struct {
	// Firm is the firm these records belong to (set by the wiring from the
	// enclosing firm block).
	Firm string `json:"firm,omitempty"`
	// TenantID is the Xero organisation, sent as the xero-tenant-id
	// header and matched against webhook events. Required.
	TenantID string `json:"tenant_id"`
	// OAuth2 gets the bearer token: a custom connection's client id and
	// secret (client-credentials grant), or an app's client id, secret
	// and refresh token, or a fixed access_token. The token URL defaults
	// to https://identity.xero.com/connect/token, client authentication
	// to HTTP Basic.
	OAuth2 upstream.OAuth2Config `json:"oauth2"`
	// BaseURL is the Accounting API [https://api.xero.com/api.xro/2.0].
	BaseURL string `json:"base_url,omitempty"`
	// WebhookKey is the app's webhook signing key; Xero sends the base64
	// HMAC-SHA256 of each body under it in x-xero-signature. Without it
	// every webhook is refused.
	WebhookKey string `json:"webhook_key,omitempty"`
	// WebhookTimeout is how long one webhook delivery reads what it
	// named before it is answered; Xero wants an answer within 5 s [3s].
	// The rest is read after, by the sync.
	WebhookTimeout upstream.Duration `json:"webhook_timeout,omitempty"`
	// WebhookMaxRecords bounds the invoices one delivery keeps for
	// reading from Xero [1000]; invoices past it are acknowledged and
	// left to the sync's polling.
	WebhookMaxRecords int `json:"webhook_max_records,omitempty"`
	// SettlementRails maps words in a payment's reference or bank
	// account name to the settled_via rail, over the defaults (stripe,
	// gocardless, direct debit, card, paypal, ach, cheque/check, bacs,
	// faster payment, transfer). A payment matching none is a
	// bank_transfer.
	SettlementRails map[string]string `json:"settlement_rails,omitempty"`
	// PageSize is the largest pageSize asked of Xero [100]; a page of
	// ours asks for its limit and one more.
	PageSize int `json:"page_size,omitempty"`
	// MaxScanPages bounds the Xero pages one List reads [10].
	MaxScanPages int `json:"max_scan_pages,omitempty"`
	// Upstream is the resilience policy; the budget defaults to Xero's
	// published 60 calls a minute per organisation.
	Upstream upstream.Policy `json:"upstream,omitzero"`
}

// Option changes New.
type Option func(*Adapter)

// WithClientLinker links invoices and quotes to the practice's clients
// (the firm's records system, by linking's rule).
func WithClientLinker(l linking.Linker) Option { return func(a *Adapter) { a.clients = l } }

// Adapter is one firm's Xero organisation. It is safe for concurrent use.
type Adapter struct {
	cfg     Config
	c       *upstream.Client
	log     *zap.Logger
	clock   upstream.Clock
	rails   []rail
	clients linking.Linker
	rec     *changes.Recorder
	deps    upstream.Deps
	inbox   notifications.Inbox
	// one lets one drain of its notifications run at a time here.
	one notifications.One
	// signings remember when each quote was first read accepted.
	signings proposals.Signings
	// stamps move an invoice's version when its client, linked from the
	// records system, changes under the same UpdatedDateUTC.
	stamps *stamps.Store
}

// New checks cfg and makes the adapter.
func New(cfg Config, deps upstream.Deps, opts ...Option) (*Adapter, error) {
	if cfg.TenantID == "" {
		return nil, fmt.Errorf("xero: tenant_id is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.xero.com/api.xro/2.0"
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.WebhookTimeout <= 0 {
		cfg.WebhookTimeout = upstream.Duration(3 * time.Second)
	}
	if cfg.WebhookMaxRecords <= 0 {
		cfg.WebhookMaxRecords = 1000
	}
	auth, err := oauthtoken.New(oauthtoken.Xero, cfg.OAuth2, "https://identity.xero.com/connect/token", "basic", deps)
	if err != nil {
		return nil, err
	}
	rails, err := newRails(cfg.SettlementRails)
	if err != nil {
		return nil, err
	}
	c, err := upstream.NewClient(upstream.Options{
		System:   "xero",
		BaseURL:  cfg.BaseURL,
		Policy:   cfg.Upstream,
		Defaults: upstream.Policy{RateLimit: 60, RatePeriod: upstream.Duration(time.Minute)},
		Auth:     tenantAuth{auth, cfg.TenantID},
		Account:  cfg.TenantID,
		// Xero's limits are per organisation, whichever Xero API spends
		// them: Xero Practice Manager's adapter names the same account.
		Allowances: []upstream.Allowance{DailyAllowance},
	}, deps)
	if err != nil {
		return nil, fmt.Errorf("xero: %w", err)
	}
	a := &Adapter{
		cfg:      cfg,
		c:        c,
		log:      deps.LoggerOrNop().With(zap.String("upstream", c.Label())),
		clock:    deps.ClockOrSystem(),
		rails:    rails,
		rec:      deps.ChangeRecorder(),
		deps:     deps,
		inbox:    deps.NotificationInbox(),
		signings: proposals.Signings{State: deps.StateStore(), Firm: cfg.Firm},
		stamps:   stamps.New(deps.StateStore(), deps.ClockOrSystem(), "xero", cfg.Firm),
	}
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

// DailyAllowance is Xero's published 5,000 calls a day per organisation,
// beside its 60 a minute (the budget's default rate).
var DailyAllowance = upstream.Allowance{Limit: 5000, Per: 24 * time.Hour}

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

func (a *Adapter) serves(t practice.Tenant) bool {
	return !t.Sandbox && (a.cfg.Firm == "" || t.Firm == a.cfg.Firm)
}

// List returns a page of invoices or engagements (quotes); other kinds
// are empty.
func (a *Adapter) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if !a.serves(t) {
		return practice.Page{}, fmt.Errorf("xero: no records for %s: %w", t, practice.ErrNotFound)
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
	case practice.Engagements:
		return a.listQuotes(ctx, t, q.Filter, cur, limit)
	case practice.Invoices:
	default:
		return practice.Page{Items: []json.RawMessage{}}, nil
	}
	since := q.Filter.UpdatedSince
	// Xero applies every filter, so a page of ours is the next limit
	// invoices, and one more says whether there are others. A listing
	// keeps the page size it started with: Xero pages are numbered.
	size := min(limit+1, a.cfg.PageSize)
	w := paging.Walk[invoice]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[invoice], error) {
			return a.fetchInvoices(ctx, since, token, size)
		},
		ID: func(inv invoice) string { return inv.InvoiceID },
		Match: func(inv invoice) bool {
			if inv.Type != "ACCREC" {
				return false
			}
			if since.IsZero() {
				return true
			}
			u, err := xeroTime(inv.UpdatedDateUTC)
			return err == nil && !u.Before(since)
		},
		Convert: func(ctx context.Context, invs []paging.Found[invoice]) ([]json.RawMessage, error) {
			return a.invoicesJSON(ctx, t, invs)
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// fetchInvoices reads one Xero page. The token is "<page>:<pageSize>";
// the first page is read with size.
func (a *Adapter) fetchInvoices(ctx context.Context, since time.Time, token string, size int) (paging.VendorPage[invoice], error) {
	var page paging.VendorPage[invoice]
	n := 1
	if token != "" {
		p, s, ok := strings.Cut(token, ":")
		var err1, err2 error
		n, err1 = strconv.Atoi(p)
		size, err2 = strconv.Atoi(s)
		if !ok || err1 != nil || err2 != nil || n < 1 || size < 1 || size > 1000 {
			return page, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
				Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
		}
	}
	q := url.Values{
		"page":     {strconv.Itoa(n)},
		"pageSize": {strconv.Itoa(size)},
		"where":    {`Type=="ACCREC"`},
		"order":    {"InvoiceID ASC"},
	}
	h := http.Header{}
	if !since.IsZero() {
		h.Set("If-Modified-Since", since.UTC().Format(time.RFC3339))
	}
	body, err := a.getInvoices(ctx, upstream.Request{Path: "/Invoices", Query: q, Header: h}, "invoices")
	if err != nil {
		return page, fmt.Errorf("xero: list invoices: %w", err)
	}
	page.Items = body.Invoices
	more := len(body.Invoices) == size
	if body.Pagination != nil && body.Pagination.PageCount > 0 {
		more = n < body.Pagination.PageCount
	}
	if body.Pagination != nil {
		page.Total = body.Pagination.ItemCount
	}
	if more {
		page.Next = strconv.Itoa(n+1) + ":" + strconv.Itoa(size)
	}
	return page, nil
}

// Get returns one invoice or engagement.
func (a *Adapter) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("xero: no records for %s: %w", t, practice.ErrNotFound)
	}
	if quoteID, ok := strings.CutPrefix(id, "eng_"); k == practice.Engagements && ok && isUUID(quoteID) {
		return a.getQuote(ctx, t, quoteID)
	}
	invID, ok := parseID(id)
	if k != practice.Invoices || !ok {
		return nil, fmt.Errorf("xero: no %s %q: %w", k.Singular(), id, practice.ErrNotFound)
	}
	inv, err := a.readInvoice(ctx, invID)
	if err != nil {
		return nil, err
	}
	return a.invoiceJSON(ctx, t, &inv)
}

func (a *Adapter) readInvoice(ctx context.Context, invID string) (invoice, error) {
	body, err := a.getInvoices(ctx, upstream.Request{Path: "/Invoices/" + invID}, "invoice")
	if err != nil {
		return invoice{}, fmt.Errorf("xero: read invoice %s: %w", invID, err)
	}
	if len(body.Invoices) != 1 || body.Invoices[0].Type != "ACCREC" {
		return invoice{}, fmt.Errorf("xero: invoice %s is not a sales invoice: %w", invID, practice.ErrNotFound)
	}
	return body.Invoices[0], nil
}

// readInvoices reads the invoices of ids in one call (Xero's IDs
// filter); an id Xero does not answer for is not among them.
func (a *Adapter) readInvoices(ctx context.Context, ids []string) ([]invoice, error) {
	body, err := a.getInvoices(ctx, upstream.Request{Path: "/Invoices", Query: url.Values{"IDs": {strings.Join(ids, ",")}}}, "invoices")
	if err != nil {
		return nil, fmt.Errorf("xero: read %d invoices: %w", len(ids), err)
	}
	return body.Invoices, nil
}

// getInvoices makes a call that answers with invoices; what names the
// answer in a malformed-answer error.
func (a *Adapter) getInvoices(ctx context.Context, r upstream.Request, what string) (invoices, error) {
	resp, err := a.c.Do(ctx, r)
	if err != nil {
		return invoices{}, err
	}
	body, err := decodeInvoices(resp.Body)
	if err != nil {
		return invoices{}, upstream.Malformed(a.c.Label(), what, err)
	}
	return body, nil
}

// parseID takes the InvoiceID, a UUID, out of inv_<InvoiceID>.
func parseID(id string) (string, bool) {
	u, ok := strings.CutPrefix(id, "inv_")
	return u, ok && isUUID(u)
}

func isUUID(u string) bool {
	if len(u) != 36 {
		return false
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return false
		}
	}
	return true
}

var _ practice.Reader = (*Adapter)(nil)

// Upstream is the adapter's resilient client, for readiness reports.
func (a *Adapter) Upstream() *upstream.Client { return a.c }
