// Package oauthtoken gets and renews the OAuth2 bearer tokens that vendor
// APIs take (Xero, Microsoft Graph, Google Drive, Dropbox, Intuit), keeping a
// refresh token the vendor rotates where every gateway instance finds it.
package oauthtoken

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"go.uber.org/zap"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Source is an upstream.Authorizer sending "Authorization: Bearer <token>" and
// renewing the token a minute before it expires. golang.org/x/oauth2 runs
// the grants; OAuth2 adds what the library leaves to its caller: a refresh
// token the vendor rotates (Xero, Microsoft, Dropbox and Intuit do, and the old one
// stops working) is kept in the StateStore, so a restart, or another
// gateway sharing the store, carries on with the newest.
//
// A refresh is done by one gateway instance at a time, under a lease
// (upstream.Locks), and what it gets (the access token, its expiry and the
// rotated refresh token) is saved in the StateStore, sealed there, before
// the access token is used: an instance that finds the lease held waits
// for the holder's save and uses that token instead of refreshing with a
// refresh token the vendor has just replaced.
//
// The token request goes through the http.Client that the caller's context
// carries under oauth2.HTTPClient (upstream.Client puts its own there, so the
// transport, the attempt's timeout and the breaker apply), and is canceled
// with that context: the library's ReuseTokenSource would instead keep the
// context of the first call for every later refresh.
type Source struct {
	system   string
	cfg      upstream.OAuth2Config
	style    oauth2.AuthStyle
	state    changes.StateStore
	stateKey string // the refresh token alone, as versions before the shared token read it
	tokenKey string // the shared token (saved)
	// refusedKey holds the digest of the refresh token the vendor last
	// refused (invalid_grant), so that no instance sends it again.
	refusedKey string
	// grantRefused is upstream.Deps.GrantRefused.
	grantRefused func(reason string)
	clock        upstream.Clock
	locks        upstream.Locks
	lockName     string
	holder       string
	logger       *zap.Logger
	// leaseTTL bounds a refresh (its request gets half of it, so that it
	// ends before the lease does) and how long a dead holder blocks the
	// others; poll is how often a waiter looks at the lease again.
	leaseTTL, poll time.Duration

	// mu makes one caller fetch at a time while the others wait for its
	// token, as oauth2.ReuseTokenSource does.
	mu      sync.Mutex
	token   string
	expiry  time.Time // on clock, which tests move by hand
	refresh string    // the newest refresh token; empty until first loaded
	// unsaved is a grant's answer the store refused: its refresh token
	// is the only one the vendor still takes, so it is saved again before
	// anything else, and not used until it is.
	unsaved *saved
	// refused is the refresh token the vendor refused, as far as this
	// instance knows; empty while none was.
	refused string
	// rejected is the access token the vendor last answered 401 to: it
	// is not taken from the store again.
	rejected string
}

// saved is the token every instance shares, under Source.tokenKey.
type saved struct {
	AccessToken  string    `json:"access_token"`
	Expiry       time.Time `json:"expiry"` // on the Source's clock
	RefreshToken string    `json:"refresh_token"`
}

// New makes the token source for cfg; tokenURL and authStyle are the
// vendor's defaults for fields cfg leaves empty. system names the vendor in
// errors and in the state key.
func New(system string, cfg upstream.OAuth2Config, tokenURL, authStyle string, d upstream.Deps) (*Source, error) {
	if cfg.TokenURL == "" {
		cfg.TokenURL = tokenURL
	}
	if cfg.AuthStyle == "" {
		cfg.AuthStyle = authStyle
	}
	if !cfg.Configured() {
		return nil, fmt.Errorf("%s: set access_token, or client_id and client_secret (and refresh_token for the refresh grant)", system)
	}
	styles := map[string]oauth2.AuthStyle{"basic": oauth2.AuthStyleInHeader, "body": oauth2.AuthStyleInParams}
	style, ok := styles[cfg.AuthStyle]
	if !ok {
		return nil, fmt.Errorf("%s: auth_style %q must be basic or body", system, cfg.AuthStyle)
	}
	prefix := keyPrefix(system, cfg)
	return &Source{
		system:       system,
		cfg:          cfg,
		style:        style,
		state:        d.StateStore(),
		stateKey:     prefix + "/refresh_token",
		tokenKey:     prefix + "/token",
		refusedKey:   prefix + "/refused",
		grantRefused: d.GrantRefused,
		clock:        d.ClockOrSystem(),
		locks:        d.Locks,
		lockName:     prefix + "/refresh",
		holder:       holderID(),
		logger:       d.LoggerOrNop(),
		leaseTTL:     30 * time.Second,
		poll:         50 * time.Millisecond,
		token:        cfg.AccessToken,
	}, nil
}

// WithLease sets how long a refresh may hold the lease (default 30s) and
// how often an instance waiting for it looks again (default 50ms).
func (o *Source) WithLease(ttl, poll time.Duration) *Source {
	o.leaseTTL, o.poll = ttl, poll
	return o
}

// The system names adapters keep their tokens under, and a connection's
// consent seeds them under (Seed).
const (
	Xero    = "xero" // the Xero ledger and Xero Practice Manager
	Graph   = "graph"
	GDrive  = "gdrive"
	Dropbox = "dropbox"
	Intuit  = "intuit" // QuickBooks Online
)

// keyPrefix is where the tokens of system's app, or of one connection
// through it, are kept.
func keyPrefix(system string, cfg upstream.OAuth2Config) string {
	prefix := "oauth2/" + system + "/" + cfg.ClientID
	if cfg.Connection != "" {
		prefix += "/" + cfg.Connection
	}
	return prefix
}

// Seed saves the token a connection's consent got (the authorization
// code's answer) where the Source New makes for the same system and cfg
// (cfg.Connection set) reads it, sealed by the store like every token.
func Seed(ctx context.Context, d upstream.Deps, system string, cfg upstream.OAuth2Config, tok *oauth2.Token) error {
	if cfg.Connection == "" || tok.RefreshToken == "" {
		return errors.New("oauth2: a connection's consent must give a refresh token (offline access)")
	}
	s := saved{AccessToken: tok.AccessToken, Expiry: d.ClockOrSystem().Now().Add(lifetime(tok)), RefreshToken: tok.RefreshToken}
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := d.StateStore().Save(ctx, keyPrefix(system, cfg)+"/token", raw); err != nil {
		return fmt.Errorf("save the connection's token: %w", err)
	}
	return nil
}

// Stored returns the token saved for system and cfg (its refresh token is
// what a disconnect revokes), nil when none is.
func Stored(ctx context.Context, d upstream.Deps, system string, cfg upstream.OAuth2Config) (*oauth2.Token, error) {
	raw, err := d.StateStore().Last(ctx, keyPrefix(system, cfg)+"/token")
	if err != nil || len(raw) == 0 {
		return nil, err
	}
	var s saved
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errors.New("load oauth2 token: the saved token is not readable")
	}
	return &oauth2.Token{AccessToken: s.AccessToken, RefreshToken: s.RefreshToken}, nil
}

// Forget drops the token saved for system and cfg (a disconnected
// connection's), so that nothing can use it again.
func Forget(ctx context.Context, d upstream.Deps, system string, cfg upstream.OAuth2Config) error {
	prefix := keyPrefix(system, cfg)
	for _, key := range []string{prefix + "/token", prefix + "/refused"} {
		if err := d.StateStore().Save(ctx, key, nil); err != nil {
			return fmt.Errorf("forget the connection's token: %w", err)
		}
	}
	return nil
}

func holderID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (o *Source) Authorize(ctx context.Context, h http.Header) error {
	tok, err := o.Token(ctx)
	if err != nil {
		return err
	}
	h.Set("Authorization", "Bearer "+tok)
	return nil
}

// Rejected implements upstream.Rejecter: the vendor answered 401 to the
// access token in h (its grant revoked, or the token expired early), so
// the next call fetches another, and finds out on the way whether the
// grant itself is refused, rather than waiting for the token's expiry.
func (o *Source) Rejected(h http.Header) {
	tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || tok == "" || tok == o.cfg.AccessToken {
		return // a configured token is renewed by whoever configured it
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rejected = tok
	if o.token == tok {
		o.token, o.expiry = "", time.Time{}
	}
}

// Token returns a current access token, fetching one when needed.
func (o *Source) Token(ctx context.Context) (string, error) {
	if o.cfg.AccessToken != "" {
		return o.cfg.AccessToken, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fresh(o.token, o.expiry) {
		return o.token, nil
	}
	if _, ok := ctx.Value(oauth2.HTTPClient).(*http.Client); !ok {
		// The library would fall back to http.DefaultClient, which has no
		// timeout at all.
		ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: 15 * time.Second})
	}
	if !o.cfg.RefreshGrant() {
		// The client-credentials grant has nothing to rotate: each
		// instance fetches its own token.
		tok, err := o.grant(ctx)
		if err != nil {
			return "", tokenError(o.cfg.TokenURL, err)
		}
		o.token, o.expiry = tok.AccessToken, o.clock.Now().Add(lifetime(tok))
		return o.token, nil
	}
	if o.unsaved != nil {
		if err := o.save(ctx, *o.unsaved); err != nil {
			return "", err
		}
		o.unsaved = nil
		if o.fresh(o.token, o.expiry) {
			return o.token, nil
		}
	}
	if err := o.refreshShared(ctx); err != nil {
		return "", err
	}
	return o.token, nil
}

func (o *Source) fresh(token string, expiry time.Time) bool {
	return token != "" && o.clock.Now().Before(expiry.Add(-time.Minute))
}

// lifetime is how long tok lasts: the library dates the expiry by the wall
// clock, and the Source counts it on its own.
func lifetime(tok *oauth2.Token) time.Duration {
	if tok.Expiry.IsZero() {
		return time.Hour
	}
	return time.Until(tok.Expiry)
}

// refreshShared takes the token another instance saved if it is fresh,
// else refreshes under the lease; while another instance holds the lease
// it waits (up to one and a half times the lease's ttl, or ctx) for that one's
// token.
func (o *Source) refreshShared(ctx context.Context) error {
	deadline := time.Now().Add(o.leaseTTL + o.leaseTTL/2)
	for {
		if ok, err := o.adoptSaved(ctx); err != nil || ok {
			return err
		}
		if err := o.checkRefused(ctx); err != nil {
			return err
		}
		held, err := o.lock(ctx)
		if err != nil {
			return err
		}
		if held {
			defer o.unlock(ctx)
			// The holder before this one may have saved its token
			// between the read above and the lease.
			if ok, err := o.adoptSaved(ctx); err != nil || ok {
				return err
			}
			if err := o.checkRefused(ctx); err != nil {
				return err
			}
			return o.refreshAndSave(ctx)
		}
		if time.Now().After(deadline) {
			return &practice.UnavailableError{Upstream: tokenEndpoint,
				Err: errors.New("another gateway instance is refreshing the token and has not saved it")}
		}
		t := time.NewTimer(o.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return &practice.UnavailableError{Upstream: tokenEndpoint, Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// adoptSaved loads the newest refresh token saved by any instance and,
// when the access token saved beside it is fresh, takes that too (true).
func (o *Source) adoptSaved(ctx context.Context) (bool, error) {
	raw, err := o.state.Last(ctx, o.tokenKey)
	if err != nil {
		return false, fmt.Errorf("load oauth2 token: %w", err)
	}
	if len(raw) > 0 {
		var s saved
		if err := json.Unmarshal(raw, &s); err != nil || s.RefreshToken == "" {
			// The value is a secret: the decoder's error may quote it.
			return false, errors.New("load oauth2 token: the saved token is not readable")
		}
		o.refresh = s.RefreshToken
		if o.fresh(s.AccessToken, s.Expiry) && s.AccessToken != o.rejected {
			o.token, o.expiry = s.AccessToken, s.Expiry
			return true, nil
		}
		return false, nil
	}
	if o.cfg.Connection != "" {
		// A connection's tokens come from its consent alone: none saved
		// means it was disconnected (or never finished).
		return false, fmt.Errorf("oauth2 token of connection %s: none saved: %w", o.cfg.Connection, practice.ErrNeedsReconnect)
	}
	// Saved by a version before the shared token, or never.
	legacy, err := o.state.Last(ctx, o.stateKey)
	if err != nil {
		return false, fmt.Errorf("load refresh token: %w", err)
	}
	o.refresh = o.cfg.RefreshToken
	if len(legacy) > 0 {
		o.refresh = string(legacy)
	}
	return false, nil
}

// refreshAndSave runs the refresh grant and saves its answer before the
// access token is used: a rotated refresh token that is not saved is lost
// with the connection.
func (o *Source) refreshAndSave(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, o.leaseTTL/2)
	defer cancel()
	tok, err := o.grant(gctx)
	if refusedGrant(err) {
		return o.refuse(ctx)
	}
	if err != nil {
		return tokenError(o.cfg.TokenURL, err)
	}
	s := saved{AccessToken: tok.AccessToken, Expiry: o.clock.Now().Add(lifetime(tok)), RefreshToken: tok.RefreshToken}
	if s.RefreshToken == "" {
		s.RefreshToken = o.refresh
	}
	if err := o.save(ctx, s); err != nil {
		o.unsaved = &s
		return err
	}
	return nil
}

// save keeps s where every instance finds it, then makes it this one's.
func (o *Source) save(ctx context.Context, s saved) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("save oauth2 token: %w", err)
	}
	if err := o.state.Save(ctx, o.tokenKey, raw); err != nil {
		return &practice.UnavailableError{Upstream: tokenEndpoint, Err: fmt.Errorf("save rotated refresh token: %w", err)}
	}
	// Versions before the shared token read the refresh token alone; kept
	// for a rolling upgrade. A connection has no earlier version.
	if s.RefreshToken != o.refresh && o.cfg.Connection == "" {
		if err := o.state.Save(ctx, o.stateKey, []byte(s.RefreshToken)); err != nil {
			return &practice.UnavailableError{Upstream: tokenEndpoint, Err: fmt.Errorf("save rotated refresh token: %w", err)}
		}
	}
	o.refresh, o.token, o.expiry = s.RefreshToken, s.AccessToken, s.Expiry
	return nil
}

// refusedGrant reports whether the vendor refused the refresh token
// itself (RFC 6749 section 5.2 invalid_grant: revoked, expired unused, app
// removed), which no retry mends.
func refusedGrant(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == "invalid_grant"
}

// refusedError is what every call answers once the vendor refused the
// refresh token: it names the system and the vendor's error code, never a
// token, and never the vendor's error_description (which may quote one).
func (o *Source) refusedError() error {
	who := o.system
	if o.cfg.Connection != "" {
		who += " connection " + o.cfg.Connection
	}
	return fmt.Errorf("%s: the vendor refused the refresh token (invalid_grant): %w", who, practice.ErrNeedsReconnect)
}

// refuse records that the vendor refused the refresh token in use, where
// every instance sees it, and tells the gateway once.
func (o *Source) refuse(ctx context.Context) error {
	o.refused = o.refresh
	if err := o.state.Save(ctx, o.refusedKey, []byte(digest(o.refresh))); err != nil {
		// This instance still refuses it; another may try it once more.
		o.logger.Warn("oauth2 refused refresh token not recorded", zap.String("system", o.system), zap.Error(err))
	}
	if o.grantRefused != nil {
		o.grantRefused(o.system + " refused the refresh token (invalid_grant): the connection must be reconnected")
	}
	return o.refusedError()
}

// checkRefused fails with refusedError when the refresh token about to be
// used is one the vendor refused, seen by this instance or recorded by
// another: sending it again would only be refused again. A different
// refresh token (a reconnect's consent) is used.
func (o *Source) checkRefused(ctx context.Context) error {
	if o.refresh == "" {
		return nil
	}
	if o.refresh == o.refused {
		return o.refusedError()
	}
	raw, err := o.state.Last(ctx, o.refusedKey)
	if err != nil {
		return &practice.UnavailableError{Upstream: tokenEndpoint, Err: fmt.Errorf("load refused refresh token: %w", err)}
	}
	if string(raw) == digest(o.refresh) {
		o.refused = o.refresh
		return o.refusedError()
	}
	return nil
}

// digest stands for a refresh token where only its identity is needed.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (o *Source) lock(ctx context.Context) (bool, error) {
	if o.locks == nil {
		return true, nil
	}
	ok, err := o.locks.Lease(ctx, o.lockName, o.holder, o.leaseTTL)
	if err != nil {
		return false, &practice.UnavailableError{Upstream: tokenEndpoint, Err: fmt.Errorf("lease the refresh: %w", err)}
	}
	return ok, nil
}

// unlock releases the lease even when ctx has ended, so the others need
// not wait for it to expire.
func (o *Source) unlock(ctx context.Context) {
	if o.locks == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := o.locks.Release(ctx, o.lockName, o.holder); err != nil {
		o.logger.Warn("oauth2 refresh lease not released; it expires", zap.String("lease", o.lockName), zap.Error(err))
	}
}

// grant runs the client-credentials grant, or the refresh-token grant with
// the newest refresh token (the one saved by any instance, else the
// configured one).
func (o *Source) grant(ctx context.Context) (*oauth2.Token, error) {
	if !o.cfg.RefreshGrant() {
		cc := clientcredentials.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret,
			TokenURL: o.cfg.TokenURL, Scopes: o.cfg.Scopes, AuthStyle: o.style}
		return cc.Token(ctx)
	}
	conf := oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, Scopes: o.cfg.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: o.cfg.TokenURL, AuthStyle: o.style}}
	// The library keeps the refresh token it sent when the answer names
	// none, so Token saves only one that changed.
	return conf.TokenSource(ctx, &oauth2.Token{RefreshToken: o.refresh}).Token()
}

// tokenEndpoint names the token endpoint in errors.
const tokenEndpoint = "oauth2 token endpoint"

// tokenError says what a failed grant means for the request waiting on it:
// the token endpoint refused or could not be reached (the upstream is
// unavailable), or answered something that is not a token.
func tokenError(tokenURL string, err error) error {
	const endpoint = tokenEndpoint
	var re *oauth2.RetrieveError
	var ue *url.Error
	switch {
	case errors.As(err, &re):
		return &practice.UnavailableError{Upstream: endpoint,
			Err: fmt.Errorf("%s answered %d: %.200s", tokenURL, re.Response.StatusCode, re.Body)}
	case errors.As(err, &ue):
		return &practice.UnavailableError{Upstream: endpoint, Err: err}
	}
	return upstream.Malformed(endpoint, "token", err)
}

var (
	_ upstream.Authorizer = (*Source)(nil)
	_ upstream.Rejecter   = (*Source)(nil)
)
