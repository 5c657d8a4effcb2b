package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/internal/gcra"
	"github.com/practicegw/practicegw/practice"
)

// Authorizer puts a vendor's credentials on a request: static headers, or
// an OAuth2 bearer token it refreshes itself.
type Authorizer interface {
	Authorize(ctx context.Context, h http.Header) error
}

// Headers is an Authorizer that sets fixed headers.
type Headers map[string]string

func (hs Headers) Authorize(_ context.Context, h http.Header) error {
	for k, v := range hs {
		h.Set(k, v)
	}
	return nil
}

// Options describe one upstream to NewClient.
type Options struct {
	// System names the vendor ("karbon"); with Deps.Instance it makes the
	// metric label and the breaker's name.
	System string
	// BaseURL is where paths are resolved, with the API's path prefix
	// ("https://api.xero.com/api.xro/2.0").
	BaseURL string
	// Policy is the configured resilience; Defaults the vendor's own
	// defaults under it (its published rate limit).
	Policy, Defaults Policy
	Auth             Authorizer
	// Account identifies the vendor account for the shared budget, for
	// example the access key; it is hashed, never stored. Empty shares
	// one budget per base URL.
	Account string
	// BudgetSystem names the system whose account allowance the calls
	// spend when it is not System's own: Xero Practice Manager's calls
	// count against their Xero organisation's limits, so an XPM client
	// and a Xero client on one organisation draw from one budget. Empty
	// is System.
	BudgetSystem string
	// Allowances are the account's further published limits, kept in
	// the same budget beside Policy's rate (Xero's 5,000 calls a day per
	// organisation). A configured negative RateLimit turns them off too.
	Allowances []Allowance
	// Metered are allowances the vendor bills rather than refuses
	// (QuickBooks' reads, metered by the app's plan): the client sends
	// past them, and the read model's sync plans its polls within them.
	Metered []Allowance
	// MaxConcurrent bounds the calls in flight at once (QuickBooks: 10
	// per company); 0 is no bound.
	MaxConcurrent int
	// RateLimitedWait is how long a 429 without Retry-After asks to wait
	// (QuickBooks: 60 s); until it has passed every call of the client
	// fails at once, unsent, rather than spend the vendor's patience.
	// 0 leaves such a 429 to the backoff.
	RateLimitedWait time.Duration
	// Transport replaces the HTTP transport (tests, benchmarks).
	Transport http.RoundTripper
}

// Allowance is Limit calls per Per against a vendor account.
type Allowance struct {
	Limit int
	Per   time.Duration
}

// booked is the rate a Budget books a vendor's allowance at: the Budget's
// burst of its limit, then one per per/limit, would let nearly twice a
// published limit through in the first window after an idle spell (the
// burst, then a window's rate), while a vendor counts every window. The
// cell of gcra.Within (a burst of a tenth, the rest spread evenly) holds
// every window, and a burst of b per b intervals is that cell. Microseconds,
// so the Redis budget's script computes the same interval.
func (a Allowance) booked() (limit int, per time.Duration) {
	c := gcra.Within(int64(a.Limit), a.Per.Microseconds())
	return int(c.Tolerance / c.Interval), time.Duration(c.Tolerance) * time.Microsecond
}

// Client calls one upstream with the resilience of its Policy. It is safe
// for concurrent use; make one per vendor account and keep it.
type Client struct {
	label     string
	base      *url.URL
	hc        *http.Client
	tokenHC   *http.Client // for OAuth2 token endpoints, on another host
	p         Policy
	auth      Authorizer
	budget    Budget
	budgetKey string
	// allowances are the further limits, each under its own key.
	allowances []keyedAllowance
	metered    []Allowance
	// slots holds a token per call in flight when calls are bounded.
	slots chan struct{}
	// rateLimitedWait and heldUntil (Unix nanoseconds on clock) are
	// Options.RateLimitedWait and the end of the wait a 429 asked for.
	rateLimitedWait time.Duration
	heldUntil       atomic.Int64
	clock           Clock
	log             *zap.Logger
	m               *metrics
	cb              *gobreaker.CircuitBreaker[*Response]
	openedAt        atomic.Int64 // Unix nanoseconds the breaker last opened
	// sent counts requests sent to the vendor, every attempt.
	sent atomic.Uint64
	// lastOK is when the vendor last answered 2xx (Unix nanoseconds on
	// the client's clock), for a firm's view of its connection.
	lastOK atomic.Int64
	// outcomes are this upstream's request counters, looked up once
	// rather than per call.
	outcomes map[string]prometheus.Counter
	duration prometheus.Observer
}

// NewClient makes the client for one upstream.
func NewClient(o Options, d Deps) (*Client, error) {
	base, err := url.Parse(strings.TrimSuffix(o.BaseURL, "/"))
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("%s: base url %q must be absolute, such as https://api.example.com", o.System, o.BaseURL)
	}
	m, err := newMetrics(d.Registerer)
	if err != nil {
		return nil, fmt.Errorf("%s: register metrics: %w", o.System, err)
	}
	p := o.Policy.withDefaults(o.Defaults)
	tr := o.Transport
	if tr == nil {
		tr = d.Transport
	}
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 32
		tr = t
	}
	account := sha256.Sum256([]byte(base.Host + "\x00" + o.Account))
	budgetSystem := o.BudgetSystem
	if budgetSystem == "" {
		budgetSystem = o.System
	}
	c := &Client{
		label:     d.Label(o.System),
		base:      base,
		p:         p,
		auth:      o.Auth,
		budget:    d.Budget,
		budgetKey: budgetSystem + ":" + hex.EncodeToString(account[:8]),
		clock:     d.clock(),
		log:       d.logger().With(zap.String("upstream", d.Label(o.System))),
		m:         m,
		metered:   o.Metered,

		rateLimitedWait: o.RateLimitedWait,
	}
	if o.MaxConcurrent > 0 {
		c.slots = make(chan struct{}, o.MaxConcurrent)
	}
	for _, a := range dailyLimit(o.Allowances, p.DailyLimit) {
		if a.Limit > 0 && a.Per > 0 {
			c.allowances = append(c.allowances, keyedAllowance{a, c.budgetKey + "/" + a.Per.String()})
		}
	}
	if c.auth == nil {
		c.auth = Headers(nil)
	}
	if c.budget == nil {
		c.budget = NewLocalBudget(c.clock)
	}
	c.hc = &http.Client{Transport: tr, CheckRedirect: c.sameOriginRedirect}
	c.tokenHC = &http.Client{Transport: tr}
	c.outcomes = map[string]prometheus.Counter{}
	for _, o := range []string{outcomeOK, outcomeClientError, outcomeRateLimited, outcomeServerError, outcomeTimeout,
		outcomeNetwork, outcomeBreakerOpen, outcomeBudget, outcomeCanceled} {
		c.outcomes[o] = m.requests.WithLabelValues(c.label, o)
	}
	c.duration = m.duration.WithLabelValues(c.label)
	c.cb = c.breaker()
	c.m.breaker.WithLabelValues(c.label).Set(0)
	return c, nil
}

// breaker is the client's circuit breaker, by its policy: open after
// BreakerFailures failures in a row, for BreakerTimeout, then one probe.
func (c *Client) breaker() *gobreaker.CircuitBreaker[*Response] {
	return gobreaker.NewCircuitBreaker[*Response](gobreaker.Settings{
		Name:        c.label,
		MaxRequests: 1,
		Timeout:     time.Duration(c.p.BreakerTimeout),
		ReadyToTrip: func(n gobreaker.Counts) bool {
			return n.ConsecutiveFailures >= uint32(c.p.BreakerFailures)
		},
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				c.openedAt.Store(time.Now().UnixNano())
				c.log.Warn("circuit breaker opened", zap.Duration("for", time.Duration(c.p.BreakerTimeout)))
			}
			c.m.breaker.WithLabelValues(c.label).Set(float64(to))
		},
		IsSuccessful: breakerSuccess,
		// A refused grant (needs reconnect) never reached the vendor's API:
		// it is no outage, and must not turn into one.
		IsExcluded: func(err error) bool { return errors.Is(err, errCanceled) || errors.Is(err, practice.ErrNeedsReconnect) },
	})
}

// Label is the upstream's metric label.
func (c *Client) Label() string { return c.label }

// BaseURL is the configured base URL.
func (c *Client) BaseURL() *url.URL { return c.base }

// Request is one call. Path is relative to the base URL ("/v3/WorkItems")
// or an absolute URL on the base URL's origin (a vendor's next link).
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	// Body is sent as is, with ContentType (default application/json).
	Body        []byte
	ContentType string
	// Idempotent allows retries of a method other than GET and HEAD: the
	// read RPCs of APIs that use POST for everything (Dropbox).
	Idempotent bool
}

// Response is a 2xx answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON makes the call and decodes a 2xx body into v (nil: ignore the
// body). what names the answer in a malformed-answer error.
func (c *Client) JSON(ctx context.Context, r Request, what string, v any) (*Response, error) {
	resp, err := c.Do(ctx, r)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := DecodeJSON(resp.Body, v); err != nil {
			return nil, Malformed(c.label, what, err)
		}
	}
	return resp, nil
}

// Do makes the call: through the breaker and the budget, one attempt at a
// time with a timeout each, retrying idempotent calls on 5xx, 429,
// timeouts and connection errors with exponential backoff and full jitter
// (or the vendor's Retry-After when it sends one). Answers outside 2xx
// come back as errors (see the package comment).
func (c *Client) Do(ctx context.Context, r Request) (*Response, error) {
	u, err := c.resolve(r.Path, r.Query)
	if err != nil {
		return nil, err
	}
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	idempotent := r.Idempotent || r.Method == http.MethodGet || r.Method == http.MethodHead
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		case <-ctx.Done():
			return nil, fmt.Errorf("%s %s %s: %w", c.label, r.Method, r.Path, ctx.Err())
		}
	}
	for attempt := 1; ; attempt++ {
		if err := c.admit(ctx); err != nil {
			return nil, err
		}
		resp, err := c.cb.Execute(func() (*Response, error) { return c.send(ctx, r, u) })
		if err == nil {
			return resp, nil
		}
		if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
			c.outcomes[outcomeBreakerOpen].Inc()
			return nil, c.breakerOpen()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s %s: %w", c.label, r.Method, r.Path, ctx.Err())
		}
		wait, retry := retryable(err, idempotent)
		if !retry || attempt >= c.p.MaxAttempts {
			return nil, c.final(err)
		}
		if wait > time.Duration(c.p.MaxRetryWait) {
			return nil, &practice.UnavailableError{Upstream: c.label, RetryAfter: wait, Err: err}
		}
		if wait == 0 {
			wait = c.backoff(attempt)
		}
		if err := c.clock.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s %s %s: %w", c.label, r.Method, r.Path, err)
		}
	}
}

// admit refuses at once while the breaker is open, before spending budget,
// then books the call against the vendor account's budget, waiting for it
// when the wait is short.
func (c *Client) admit(ctx context.Context) error {
	if c.cb.State() == gobreaker.StateOpen {
		c.outcomes[outcomeBreakerOpen].Inc()
		return c.breakerOpen()
	}
	if left := time.Duration(c.heldUntil.Load() - c.clock.Now().UnixNano()); left > 0 {
		c.outcomes[outcomeRateLimited].Inc()
		return &practice.UnavailableError{Upstream: c.label, RetryAfter: left, Err: errRateLimited}
	}
	if c.p.RateLimit < 0 {
		return nil
	}
	rate := keyedAllowance{Allowance{c.p.RateLimit, time.Duration(c.p.RatePeriod)}, c.budgetKey}
	yield := practice.GivesWay(ctx) && !waitsNot(ctx)
	if !yield {
		n := waitingFor(rate.key)
		n.Add(1)
		defer n.Add(-1)
	}
	if err := c.take(ctx, rate, yield); err != nil {
		return err
	}
	// A call the rate allows but a longer allowance refuses has booked
	// one call of the rate it never makes: a little early caution, never
	// more calls than published.
	for _, a := range c.allowances {
		if err := c.take(ctx, a, false); err != nil {
			return err
		}
	}
	return nil
}

type keyedAllowance struct {
	Allowance
	key string
}

// waiting counts, per allowance, the calls of this process waiting for
// it that do not give way.
var waiting sync.Map // key → *atomic.Int64

func waitingFor(key string) *atomic.Int64 {
	n, _ := waiting.LoadOrStore(key, new(atomic.Int64))
	return n.(*atomic.Int64)
}

// giveWay waits while calls that do not give way wait for the allowance
// in this process, until a call has given way for givingWayAtMost in
// all: then it takes its turn, so a poll goes on, a page a minute, under
// an allowance its clients spend whole.
func (c *Client) giveWay(ctx context.Context, a keyedAllowance, given *time.Duration) error {
	n := waitingFor(a.key)
	step := max(a.Per/time.Duration(max(a.Limit, 1))/4, 5*time.Millisecond)
	for ; n.Load() > 0 && *given < givingWayAtMost; *given += step {
		if err := c.clock.Sleep(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// givingWayAtMost is how long one call gives way in all. The sync's
// lease is renewed meanwhile.
const givingWayAtMost = time.Minute

// take books one call against an allowance, waiting for it when the wait
// is short; one that yields gives way, each time it would book, to the
// calls that do not.
func (c *Client) take(ctx context.Context, a keyedAllowance, yield bool) error {
	var waited, given time.Duration
	for {
		if yield {
			if err := c.giveWay(ctx, a, &given); err != nil {
				return err
			}
		}
		limit, per := a.booked()
		if yield {
			limit, per = leaving(limit, per)
		}
		wait, err := c.budget.Take(ctx, a.key, limit, per)
		if err != nil && ctx.Err() != nil {
			// The call is abandoned, not the budget down.
			return ctx.Err()
		}
		if err != nil {
			// A budget store that is down must not take the vendor
			// down with it: the vendor's own 429s still guard.
			c.log.Warn("request budget unavailable; calling without it", zap.Error(err))
			return nil
		}
		if wait == 0 {
			return nil
		}
		if waitsNot(ctx) {
			c.outcomes[outcomeBudget].Inc()
			return &practice.UnavailableError{Upstream: c.label, RetryAfter: wait,
				Err: fmt.Errorf("%w: request budget of %d per %s spent", errNotNow, a.Limit, a.Per)}
		}
		if waited+wait > time.Duration(c.p.MaxRetryWait) && !yield {
			// A caller waits for the answer; a sync's call that gives
			// way has no one waiting and waits its turn instead, however
			// long the vendor's rate takes (ctx ends it), rather than
			// fail and be tried again.
			c.outcomes[outcomeBudget].Inc()
			return &practice.UnavailableError{Upstream: c.label, RetryAfter: wait,
				Err: fmt.Errorf("request budget of %d per %s spent", a.Limit, a.Per)}
		}
		if err := c.clock.Sleep(ctx, wait); err != nil {
			return err
		}
		waited += wait
	}
}

type withoutWaiting struct{}

// WithoutWaiting marks ctx's calls as ones that take the vendor's budget
// only when it has room now: one it would have to wait for is refused at
// once (a practice.UnavailableError with the wait), unsent, and gives
// way to nothing. A firm's other system asking this one for a link during
// its first read leaves the link for later rather than queue behind this
// system's own sync (practice.LinksLater).
func WithoutWaiting(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutWaiting{}, true)
}

func waitsNot(ctx context.Context) bool {
	v, _ := ctx.Value(withoutWaiting{}).(bool)
	return v
}

// errNotNow is the refusal of a call made WithoutWaiting that the budget
// has no room for now.
var errNotNow = errors.New("not sent without waiting")

// Refused reports whether err is the refusal of a call made
// WithoutWaiting for want of budget now: nothing was sent, and the vendor
// is no less usable for it.
func Refused(err error) bool { return errors.Is(err, errNotNow) }

// leaving is how a call that gives way books an allowance booked as a
// burst of limit per per: at the same rate, with half the burst left to
// the calls that do not give way. A sync's polls spend a little of the
// allowance often, and spent whole they left a burst of Xero's
// notifications its one read 0.6 s behind the allowance (a call each
// 1.1 s once Xero's burst of six is spent); leaving half, a burst's read
// goes at once. Never more calls than the allowance: the same key, the
// same interval, a shorter burst.
func leaving(limit int, per time.Duration) (int, time.Duration) {
	keep := limit / 2
	if keep == 0 {
		return limit, per
	}
	interval := per / time.Duration(limit)
	return limit - keep, interval * time.Duration(limit-keep)
}

func (c *Client) breakerOpen() error {
	left := time.Duration(c.p.BreakerTimeout) - time.Since(time.Unix(0, c.openedAt.Load()))
	return &practice.UnavailableError{Upstream: c.label, RetryAfter: max(left, time.Second), Err: errBreakerOpen}
}

var (
	errBreakerOpen = errors.New("circuit breaker open after repeated failures")
	errRateLimited = errors.New("waiting out the vendor's rate limit (429)")
)

// send is one attempt.
func (c *Client) send(ctx context.Context, r Request, u string) (*Response, error) {
	actx, cancel := context.WithTimeout(ctx, time.Duration(c.p.Timeout))
	defer cancel()
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(actx, r.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s: build request: %w", c.label, err)
	}
	c.sent.Add(1)
	for k, v := range r.Header {
		req.Header[k] = v
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if r.Body != nil {
		ct := r.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	// An OAuth2 token request made on the way goes through the same
	// transport, under this attempt's timeout and breaker.
	if err := c.auth.Authorize(context.WithValue(actx, oauth2.HTTPClient, c.tokenHC), req.Header); err != nil {
		return nil, fmt.Errorf("%s: authorize: %w", c.label, err)
	}

	start := time.Now()
	resp, err := c.hc.Do(req)
	var b []byte
	if err == nil {
		b, err = readBody(io.LimitReader(resp.Body, c.p.MaxBodyBytes+1))
		resp.Body.Close()
	}
	c.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		err = c.transportError(ctx, actx, err)
		c.outcomes[outcomeOf(err)].Inc()
		return nil, err
	}
	if int64(len(b)) > c.p.MaxBodyBytes {
		c.outcomes[outcomeOK].Inc()
		return nil, Malformed(c.label, r.Method+" "+r.Path, fmt.Errorf("body over %d bytes", c.p.MaxBodyBytes))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		c.outcomes[outcomeOK].Inc()
		c.lastOK.Store(c.clock.Now().UnixNano())
		return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
	}
	if rj, ok := c.auth.(Rejecter); ok && resp.StatusCode == http.StatusUnauthorized {
		rj.Rejected(req.Header)
	}
	if kr, ok := c.auth.(KeyRejecter); ok && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		kr.KeyRejected(ctx, resp.StatusCode)
	}
	serr := &practice.StatusError{Upstream: c.label, Method: r.Method, Path: r.Path, Status: resp.StatusCode,
		Body: b[:min(len(b), 512)], RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), c.clock.Now())}
	if resp.StatusCode == http.StatusTooManyRequests && c.rateLimitedWait > 0 {
		if serr.RetryAfter == 0 {
			serr.RetryAfter = c.rateLimitedWait
		}
		c.heldUntil.Store(c.clock.Now().Add(serr.RetryAfter).UnixNano())
	}
	c.outcomes[outcomeOf(serr)].Inc()
	return nil, serr
}

// readBody reads an answer whole into a pooled buffer and returns a copy
// of exactly its size: a page of records is tens of kilobytes, which
// io.ReadAll reads through a chain of growing chunks, twice its size in
// garbage on every call.
func readBody(r io.Reader) ([]byte, error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(r)
	return bytes.Clone(buf.Bytes()), err
}

// maxPooledBody is the largest buffer kept for the next answer.
const maxPooledBody = 1 << 20

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Attempt failures that are not answers.
var (
	errCanceled = errors.New("caller canceled")
	errTimeout  = errors.New("no answer in time")
	errNetwork  = errors.New("connection failed")
)

func (c *Client) transportError(ctx, actx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", errCanceled, ctx.Err())
	case actx.Err() != nil:
		return fmt.Errorf("%w within %s", errTimeout, time.Duration(c.p.Timeout))
	}
	return fmt.Errorf("%w: %w", errNetwork, err)
}

func outcomeOf(err error) string {
	var s *practice.StatusError
	switch {
	case errors.As(err, &s):
		switch {
		case s.Status == http.StatusTooManyRequests:
			return outcomeRateLimited
		case s.Status >= 500:
			return outcomeServerError
		}
		return outcomeClientError
	case errors.Is(err, errTimeout):
		return outcomeTimeout
	case errors.Is(err, errCanceled):
		return outcomeCanceled
	}
	return outcomeNetwork
}

// breakerSuccess counts what says nothing about the upstream's health as a
// success: a 4xx other than 429 is our request's fault (or a record that
// is not there), a malformed body came from a live server.
func breakerSuccess(err error) bool {
	if err == nil {
		return true
	}
	var s *practice.StatusError
	if errors.As(err, &s) {
		return s.Status < 500 && s.Status != http.StatusTooManyRequests
	}
	var m *MalformedError
	return errors.As(err, &m)
}

// retryable says whether another attempt may help, and how long the
// vendor asked us to wait first (0: use our backoff).
func retryable(err error, idempotent bool) (time.Duration, bool) {
	var s *practice.StatusError
	if errors.As(err, &s) {
		switch {
		case s.Status == http.StatusTooManyRequests:
			// The vendor refused before doing anything, so even a write
			// may go again.
			return s.RetryAfter, true
		case s.Status >= 500:
			return s.RetryAfter, idempotent
		}
		return 0, false
	}
	if errors.Is(err, errTimeout) || errors.Is(err, errNetwork) {
		return 0, idempotent
	}
	return 0, false
}

// final turns the last attempt's failure into the error callers see.
func (c *Client) final(err error) error {
	var s *practice.StatusError
	if errors.As(err, &s) {
		switch {
		case s.Status == http.StatusTooManyRequests || s.Status >= 500:
			return &practice.UnavailableError{Upstream: c.label, RetryAfter: s.RetryAfter, Err: err}
		case s.Status == http.StatusUnauthorized || s.Status == http.StatusForbidden:
			// Nothing the API caller can fix: the firm's credentials are
			// wrong or revoked. Say so loudly here and unavailable there.
			c.log.Error("upstream refused our credentials; check the firm's configuration", zap.Error(err))
			return &practice.UnavailableError{Upstream: c.label, Err: err}
		}
		return err
	}
	if errors.Is(err, errTimeout) || errors.Is(err, errNetwork) {
		return &practice.UnavailableError{Upstream: c.label, Err: err}
	}
	return err
}

// backoff is full jitter over BackoffBase·2^(attempt-1), capped.
func (c *Client) backoff(attempt int) time.Duration {
	ceil := min(time.Duration(c.p.BackoffBase)<<(attempt-1), time.Duration(c.p.BackoffMax))
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil) + 1
}

// EncodeQuery is url.Values.Encode with spaces as %20, which every vendor
// reads, where some OData servers take a literal + in $filter as a plus.
func EncodeQuery(q url.Values) string {
	return strings.ReplaceAll(q.Encode(), "+", "%20")
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// resolve makes the URL of a path (already escaped by the adapter) or
// checks an absolute one.
func (c *Client) resolve(p string, q url.Values) (string, error) {
	if strings.HasPrefix(p, "https://") || strings.HasPrefix(p, "http://") {
		rel, err := c.Relative(p)
		if err != nil {
			return "", err
		}
		p = rel
	}
	path, rawQuery, _ := strings.Cut(p, "?")
	if len(q) > 0 {
		if rawQuery != "" {
			rawQuery += "&"
		}
		rawQuery += EncodeQuery(q)
	}
	u := c.base.Scheme + "://" + c.base.Host + c.base.EscapedPath() + path
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	return u, nil
}

// Relative checks that link, a URL the vendor handed us (an OData next
// link), points at this upstream and returns it relative to the base URL.
// Cursors carry only relative links, so a forged cursor cannot send our
// credentials to another host.
func (c *Client) Relative(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil {
		return "", Malformed(c.label, "next link", err)
	}
	if !u.IsAbs() {
		return link, nil
	}
	prefix := c.base.EscapedPath()
	if u.Scheme != c.base.Scheme || u.Host != c.base.Host || !strings.HasPrefix(u.EscapedPath(), prefix) {
		return "", Malformed(c.label, "next link", fmt.Errorf("%q is not under %s", link, c.base))
	}
	rel := strings.TrimPrefix(u.EscapedPath(), prefix)
	if u.RawQuery != "" {
		rel += "?" + u.RawQuery
	}
	return rel, nil
}

func (c *Client) sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 || req.URL.Host != via[0].URL.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// Sent counts the requests this client has sent to the vendor's API,
// every attempt.
func (c *Client) Sent() uint64 { return c.sent.Load() }

// LastSuccess is when the vendor last answered a call of this client
// with success; zero before any did.
func (c *Client) LastSuccess() time.Time {
	if n := c.lastOK.Load(); n != 0 {
		return time.Unix(0, n).UTC()
	}
	return time.Time{}
}

// BudgetPerHour is the vendor's published limit this client keeps to,
// as calls an hour (the tightest of its rate and allowances); 0 when it
// keeps to none.
func (c *Client) BudgetPerHour() int {
	if c.p.RateLimit <= 0 || c.p.RatePeriod <= 0 {
		return 0
	}
	perHour := int(float64(c.p.RateLimit) * float64(time.Hour) / float64(c.p.RatePeriod))
	for _, a := range c.allowances {
		perHour = min(perHour, int(float64(a.Limit)*float64(time.Hour)/float64(a.Per)))
	}
	return perHour
}

// BreakerState names the state of the upstream's circuit breaker:
// "closed", "half-open" or "open", for readiness reports.
func (c *Client) BreakerState() string { return c.cb.State().String() }
