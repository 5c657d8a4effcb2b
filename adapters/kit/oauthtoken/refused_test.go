package oauthtoken_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// refreshLog is a transport to the token endpoint and the API that notes,
// for each refresh token sent, how often the endpoint refused it, and for
// each access token a caller sent, how often the API answered 401.
type refreshLog struct {
	mu       sync.Mutex
	sent     int
	refused  map[string]int
	rejected map[string]int // by caller and access token
}

// caller is the transport of one caller (a gateway instance's client).
type caller struct {
	log  *refreshLog
	name string
}

func (c caller) RoundTrip(r *http.Request) (*http.Response, error) { return c.log.roundTrip(c.name, r) }

func (l *refreshLog) RoundTrip(r *http.Request) (*http.Response, error) {
	return l.roundTrip("direct", r)
}

func (l *refreshLog) roundTrip(name string, r *http.Request) (*http.Response, error) {
	if r.Body == nil {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusUnauthorized {
			l.mu.Lock()
			l.rejected[name+" "+r.Header.Get("Authorization")]++
			l.mu.Unlock()
		}
		return resp, err
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || form.Get("grant_type") != "refresh_token" {
		return resp, err
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(answer), "invalid_grant") {
		l.refused[form.Get("refresh_token")]++
	}
	return resp, nil
}

// reusedRefusals are the refresh tokens the endpoint refused more than
// once: a call that sent a token already refused.
func (l *refreshLog) reusedRefusals() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for tok, n := range l.refused {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s refused %d times", tok, n))
		}
	}
	for tok, n := range l.rejected {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s answered 401 %d times", tok, n))
		}
	}
	return out
}

func (l *refreshLog) requests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

// secretText matches the identity double's tokens and codes.
var secretText = regexp.MustCompile(`\b(rt|at|code)-\d+-[0-9a-f]{32}\b`)

// connectionRig is a firm's Xero connection through the Xero double's
// identity service, with the gateway's shared store.
type connectionRig struct {
	t       *testing.T
	xero    *vendortest.Xero
	id      *vendortest.Identity
	clock   *vendortest.Clock
	deps    upstream.Deps
	cfg     upstream.OAuth2Config
	log     *refreshLog
	ctx     context.Context
	mu      sync.Mutex
	reasons []string
}

func newConnectionRig(t *testing.T) *connectionRig {
	x := vendortest.StartXero(t)
	r := &connectionRig{t: t, xero: x, id: x.Identity, clock: vendortest.NewClock(time.Unix(1_700_000_000, 0)),
		log: &refreshLog{refused: map[string]int{}, rejected: map[string]int{}}}
	r.id.SetNow(r.clock.Now)
	r.id.AllowRedirect("https://gw.example.com/connect/callback")
	r.deps = upstream.Deps{Clock: r.clock, State: changes.NewMemoryState(), Locks: readmodelsim.NewStore(r.clock.Now),
		GrantRefused: func(reason string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reasons = append(r.reasons, reason)
		}}
	r.cfg = upstream.OAuth2Config{ClientID: r.id.ClientID, ClientSecret: r.id.ClientSecret, Connection: "con_hollis_ledger"}
	r.ctx = context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: r.log, Timeout: 10 * time.Second})
	return r
}

// source is one gateway instance's token source for the connection.
func (r *connectionRig) source() *oauthtoken.Source {
	o, err := oauthtoken.New(oauthtoken.Xero, r.cfg, r.id.TokenURL(), "basic", r.deps)
	if err != nil {
		r.t.Fatal(err)
	}
	return o.WithLease(5*time.Second, time.Millisecond)
}

// consent gives consent at the double and seeds its token, as the
// gateway's callback does for a (re)connect.
func (r *connectionRig) consent() {
	r.t.Helper()
	conf := &oauth2.Config{ClientID: r.id.ClientID, ClientSecret: r.id.ClientSecret,
		RedirectURL: "https://gw.example.com/connect/callback", Scopes: []string{"offline_access"},
		Endpoint: oauth2.Endpoint{AuthURL: r.id.AuthorizeURL(), TokenURL: r.id.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader}}
	verifier := oauth2.GenerateVerifier()
	back, err := r.id.Allow(conf.AuthCodeURL("state", oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		r.t.Fatal(err)
	}
	tok, err := conf.Exchange(context.Background(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := oauthtoken.Seed(context.Background(), r.deps, oauthtoken.Xero, r.cfg, tok); err != nil {
		r.t.Fatal(err)
	}
}

func (r *connectionRig) refusals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}

// A refresh token the vendor refuses (invalid_grant) makes the call fail
// as needing a reconnect, naming the system and the vendor's code and no
// token; the gateway is told once; later calls fail at once without
// sending the refused token again, until a reconnect seeds a new one.
func TestRefusedGrantNeedsReconnect(t *testing.T) {
	r := newConnectionRig(t)
	r.consent()
	a := r.source()
	r.clock.Advance(31 * time.Minute)
	if _, err := a.Token(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.id.RevokeAll()
	r.clock.Advance(31 * time.Minute)

	_, err := a.Token(r.ctx)
	if !errors.Is(err, practice.ErrNeedsReconnect) {
		t.Fatalf("after the revocation: %v; want ErrNeedsReconnect", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "xero") || !strings.Contains(msg, "invalid_grant") || secretText.MatchString(msg) {
		t.Fatalf("error text %q: want the system and the vendor's code, and no token", msg)
	}
	if got := r.refusals(); len(got) != 1 || secretText.MatchString(got[0]) {
		t.Fatalf("GrantRefused told %q; want once, without a token", got)
	}
	sent := r.log.requests()
	for _, o := range []*oauthtoken.Source{a, r.source()} {
		if _, err := o.Token(r.ctx); !errors.Is(err, practice.ErrNeedsReconnect) {
			t.Fatalf("again: %v", err)
		}
	}
	if r.log.requests() != sent || len(r.refusals()) != 1 {
		t.Fatalf("the refused token was sent again (%d requests, was %d), or the gateway told twice (%d)",
			r.log.requests(), sent, len(r.refusals()))
	}

	r.consent()
	r.clock.Advance(31 * time.Minute)
	tok, err := a.Token(r.ctx)
	if err != nil || r.id.Revoked(tok) {
		t.Fatalf("after the reconnect: %q, %v; want a live token", tok, err)
	}
}

// Two instances' sources of one connection on one store, driven through
// seeded schedules of refreshes (alone and at once), API calls, expiries,
// revocations at the vendor and reconnects. After every step: no refused
// refresh token was sent twice, and no instance sent an access token the
// API refused (401) twice; a call fails exactly when the grant is
// revoked and no fresh access token is left, and then as needing a
// reconnect, the gateway told once per revoked grant; a reconnect
// resumes; no error shows a token. A failing seed replays alone with
// -run 'TestRefusedGrantSchedules/seed=N'.
func TestRefusedGrantSchedules(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			refusedGrantSchedule(t, seed)
		})
	}
}

func refusedGrantSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 26))
	r := newConnectionRig(t)
	if rng.IntN(2) == 0 {
		r.id.SetGrace(0)
	}
	r.consent()
	sources := []*oauthtoken.Source{r.source(), r.source()}
	// Each instance's API client, on its own source.
	var clients []*upstream.Client
	for i, o := range sources {
		d := r.deps
		d.Transport = caller{log: r.log, name: fmt.Sprint("instance ", i)}
		c, err := upstream.NewClient(upstream.Options{System: "xero", BaseURL: r.xero.URL,
			Policy: upstream.Policy{MaxAttempts: 1}, Auth: o}, d)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	// The model: the current grant revoked at the vendor; the newest
	// saved access token expired; every token of an earlier grant
	// expired (a source keeps its access token until it expires).
	revoked, stale, epoch, earlierExpired := false, false, 0, true
	toldBefore := 0

	check := func(step int, what string, tok string, err error) {
		t.Helper()
		if err != nil && secretText.MatchString(err.Error()) {
			t.Fatalf("step %d %s: the error shows a token: %v", step, what, err)
		}
		switch {
		case revoked && stale:
			if !errors.Is(err, practice.ErrNeedsReconnect) {
				t.Fatalf("step %d %s: revoked grant, no fresh token: %q, %v; want ErrNeedsReconnect", step, what, tok, err)
			}
		case revoked && errors.Is(err, practice.ErrNeedsReconnect):
			// An instance whose fresh token the API refused (401) refreshed.
		case err != nil:
			t.Fatalf("step %d %s: %v (revoked %v, stale %v)", step, what, err, revoked, stale)
		case !revoked && earlierExpired && r.id.Revoked(tok):
			t.Fatalf("step %d %s: a token of a revoked grant", step, what)
		}
	}
	for step := range 40 {
		var what string
		switch op := rng.IntN(10); {
		case op < 4:
			what = "token"
			i := rng.IntN(2)
			tok, err := sources[i].Token(r.ctx)
			check(step, what, tok, err)
		case op < 6:
			what = "tokens at once"
			var wg sync.WaitGroup
			toks, errs := make([]string, 2), make([]error, 2)
			for i, o := range sources {
				wg.Go(func() { toks[i], errs[i] = o.Token(r.ctx) })
			}
			wg.Wait()
			for i := range sources {
				check(step, what, toks[i], errs[i])
			}
		case op < 7:
			what = "api"
			_, err := clients[rng.IntN(2)].Do(context.Background(), upstream.Request{Path: "/Invoices",
				Header: http.Header{"Xero-Tenant-Id": {r.xero.TenantID}}})
			var se *practice.StatusError
			unauthorized := errors.As(err, &se) && se.Status == http.StatusUnauthorized
			switch {
			case err != nil && secretText.MatchString(err.Error()):
				t.Fatalf("step %d api: the error shows a token: %v", step, err)
			case revoked && stale && !errors.Is(err, practice.ErrNeedsReconnect):
				t.Fatalf("step %d api: revoked grant, no fresh token: %v; want ErrNeedsReconnect", step, err)
			case revoked && err == nil:
				t.Fatalf("step %d api: the API took a revoked grant's token", step)
			case revoked:
				if !unauthorized && !errors.Is(err, practice.ErrNeedsReconnect) {
					t.Fatalf("step %d api: %v; want 401 or ErrNeedsReconnect", step, err)
				}
			case err != nil && !(unauthorized && !earlierExpired):
				t.Fatalf("step %d api: %v (revoked %v, stale %v, earlier grant's tokens expired %v)", step, err, revoked, stale, earlierExpired)
			}
		case op < 8:
			what = "expire"
			r.clock.Advance(31 * time.Minute)
			stale, earlierExpired = true, true
		case op < 9:
			what = "revoke"
			// Every grant: an earlier consent's is not revoked by a
			// reconnect, and a source may still hold its token.
			r.id.RevokeAll()
			revoked = true
		default:
			what = "reconnect"
			r.consent()
			revoked, stale, earlierExpired = false, false, false
			epoch++
			toldBefore = len(r.refusals())
		}
		if !revoked && what != "expire" {
			stale = false // a call refreshed, or a consent seeded a fresh token
		}
		if reused := r.log.reusedRefusals(); len(reused) > 0 {
			t.Fatalf("step %d %s: a refused token was sent again: %v", step, what, reused)
		}
		for tok, n := range r.id.Refusals() {
			if n > 1 {
				t.Fatalf("step %d %s: the vendor refused %s %d times", step, what, tok, n)
			}
		}
		told := len(r.refusals()) - toldBefore
		if told > 1 || revoked && stale && strings.HasPrefix(what, "token") && told != 1 {
			t.Fatalf("step %d %s: the gateway was told %d times of grant %d's refusal; want once", step, what, told, epoch)
		}
	}
}

// Through the adapters' HTTP client, a refused grant stays a needs-
// reconnect error however often it is asked: it is no outage of the
// vendor, so it neither trips the circuit breaker (which would turn it
// into "unavailable") nor reaches the API.
func TestRefusedGrantThroughClient(t *testing.T) {
	r := newConnectionRig(t)
	r.consent()
	api := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { api++ }))
	defer srv.Close()
	p := upstream.Policy{MaxAttempts: 3, BreakerFailures: 2, BreakerTimeout: upstream.Duration(time.Hour)}
	c, err := upstream.NewClient(upstream.Options{System: "xero", BaseURL: srv.URL, Policy: p, Auth: r.source()}, r.deps)
	if err != nil {
		t.Fatal(err)
	}
	r.id.RevokeAll()
	r.clock.Advance(31 * time.Minute)
	for i := range 5 {
		if _, err := c.Do(context.Background(), upstream.Request{Path: "/Invoices"}); !errors.Is(err, practice.ErrNeedsReconnect) {
			t.Fatalf("call %d: %v; want ErrNeedsReconnect", i, err)
		}
	}
	if api != 0 || len(r.refusals()) != 1 {
		t.Fatalf("%d API calls, gateway told %d times; want none and once", api, len(r.refusals()))
	}
}

// An access token the vendor stops taking (its grant revoked while it was
// fresh) is dropped at the first 401: the next call refreshes, and so
// finds the grant refused at once rather than when the token would have
// expired; after a reconnect the next call takes the new consent's token.
func TestRejectedAccessTokenIsDropped(t *testing.T) {
	r := newConnectionRig(t)
	r.consent()
	p := upstream.Policy{MaxAttempts: 1}
	c, err := upstream.NewClient(upstream.Options{System: "xero", BaseURL: r.xero.URL, Policy: p, Auth: r.source()}, r.deps)
	if err != nil {
		t.Fatal(err)
	}
	invoices := func() error {
		_, err := c.Do(context.Background(), upstream.Request{Path: "/Invoices",
			Header: http.Header{"Xero-Tenant-Id": {r.xero.TenantID}}})
		return err
	}
	if err := invoices(); err != nil {
		t.Fatal(err)
	}
	r.id.RevokeAll()
	var se *practice.StatusError
	if err := invoices(); !errors.As(err, &se) || se.Status != http.StatusUnauthorized {
		t.Fatalf("with the revoked grant's token: %v; want the API's 401", err)
	}
	if err := invoices(); !errors.Is(err, practice.ErrNeedsReconnect) || len(r.refusals()) != 1 {
		t.Fatalf("the call after the 401: %v, gateway told %d times; want ErrNeedsReconnect, once", err, len(r.refusals()))
	}
	r.consent()
	if err := invoices(); err != nil {
		t.Fatalf("after the reconnect: %v", err)
	}

	// A reconnect while the source still holds the revoked grant's token.
	r.id.RevokeAll()
	r.consent()
	if err := invoices(); !errors.As(err, &se) || se.Status != http.StatusUnauthorized {
		t.Fatalf("with the revoked grant's token: %v; want the API's 401", err)
	}
	if err := invoices(); err != nil {
		t.Fatalf("the call after the 401, with a new consent saved: %v", err)
	}
}

// The Xero adapter on a firm's connection reads with the consent's token,
// and once the firm revokes the app at Xero its next reads say the
// connection needs a reconnect (the first may still be the API's 401 to a
// token that was fresh), and the gateway is told; a reconnect resumes.
func TestXeroAdapterOnARevokedConnection(t *testing.T) {
	r := newConnectionRig(t)
	r.xero.AddInvoice(vendortest.XeroInvoice{InvoiceID: "d4956132-ed94-4dd7-9eaa-000000000001", InvoiceNumber: "INV-0001",
		Status: "AUTHORISED", ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble",
		Date: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP"})
	r.consent()
	cfg := r.cfg
	cfg.TokenURL = r.id.TokenURL()
	a, err := xero.New(xero.Config{Firm: "frm_hollis", TenantID: r.xero.TenantID, BaseURL: r.xero.URL, OAuth2: cfg,
		Upstream: upstream.Policy{RateLimit: -1, MaxAttempts: 1}}, r.deps)
	if err != nil {
		t.Fatal(err)
	}
	list := func() error {
		_, err := a.List(context.Background(), practice.Tenant{Firm: "frm_hollis"}, practice.Invoices, practice.Query{Limit: 10})
		return err
	}
	if err := list(); err != nil {
		t.Fatal(err)
	}
	r.id.RevokeAll()
	err = list()
	if !errors.Is(err, practice.ErrNeedsReconnect) {
		err = list()
	}
	if !errors.Is(err, practice.ErrNeedsReconnect) || len(r.refusals()) != 1 || secretText.MatchString(err.Error()) {
		t.Fatalf("after the revocation: %v, gateway told %d times; want ErrNeedsReconnect, once, no token", err, len(r.refusals()))
	}
	r.consent()
	if err := list(); err != nil {
		t.Fatalf("after the reconnect: %v", err)
	}
}

// Only invalid_grant is a refused grant: an outage of the identity
// service, or another OAuth2 error, is the vendor being unavailable, and
// the same refresh token works once it is back.
func TestTokenEndpointOutageIsNoRefusal(t *testing.T) {
	r := newConnectionRig(t)
	r.consent()
	a := r.source()
	r.clock.Advance(31 * time.Minute)
	for _, f := range []vendortest.Fault{
		{Status: http.StatusServiceUnavailable, Body: `{"error":"temporarily_unavailable"}`},
		{Status: http.StatusBadRequest, Body: `{"error":"invalid_request"}`},
	} {
		r.id.Faults.Down(f)
		_, err := a.Token(r.ctx)
		var ue *practice.UnavailableError
		if !errors.As(err, &ue) || errors.Is(err, practice.ErrNeedsReconnect) || len(r.refusals()) != 0 {
			t.Fatalf("token endpoint answering %d %s: %v, gateway told %d times; want unavailable, no refusal", f.Status, f.Body, err, len(r.refusals()))
		}
		r.id.Faults.Up()
	}
	if tok, err := a.Token(r.ctx); err != nil || r.id.Revoked(tok) {
		t.Fatalf("with the identity service back: %q, %v", tok, err)
	}
}
