package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// exchangeTimeout bounds the code's exchange at the token endpoint.
const exchangeTimeout = 15 * time.Second

// CallbackPath is where vendors send the administrator back after the
// consent, under public_url.
const CallbackPath = "/connect/callback"

// consent is s's app as a consent uses it; nil when the operator
// registered none, or its app takes no consent.
func (m *Manager) consent(s System) firmsystem.Consent {
	app, _ := m.cfg.app(s.App).(firmsystem.Consent)
	return app
}

// oauthConfig is s's OAuth2 client, redirecting to the gateway's
// callback; the consent app is registered.
func (m *Manager) oauthConfig(s System) (*oauth2.Config, firmsystem.OAuthClient) {
	client := m.consent(s).OAuth(s.Name)
	cfg := client.Config
	cfg.RedirectURL = m.cfg.PublicURL + CallbackPath
	return &cfg, client
}

// tokenConfig is where the connection's tokens are kept (oauthtoken).
func tokenConfig(c connection.Connection, client firmsystem.OAuthClient) upstream.OAuth2Config {
	return upstream.OAuth2Config{ClientID: client.Config.ClientID, ClientSecret: client.Config.ClientSecret,
		TokenURL: client.Config.Endpoint.TokenURL, Scopes: client.Config.Scopes, Connection: c.ID}
}

// authorize saves the consent awaited for c's attempt and answers its
// start link (start.go): a random state bound to the connection and the
// attempt, a PKCE verifier (S256) kept sealed by the store, and the
// single-use token of the link.
func (m *Manager) authorize(ctx context.Context, c connection.Connection, s System) (string, error) {
	a := connection.Authorization{
		OAuthState: randomToken(32),
		Start:      randomToken(32),
		Connection: c.ID,
		Firm:       c.Firm,
		Attempt:    c.Attempt,
		Verifier:   oauth2.GenerateVerifier(),
		Expires:    m.clock.Now().Add(connection.AuthorizationTTL),
	}
	if err := m.d.Authorizations.SaveAuthorization(ctx, a); err != nil {
		return "", fmt.Errorf("save the consent awaited: %w", err)
	}
	return m.startURL(a.Start), nil
}

// oauthError keeps an OAuth2 error code that is one (RFC 6749's
// grammar, restricted) and nothing else a redirect may carry.
var oauthError = regexp.MustCompile(`^[a-z_]{1,40}$`)

// Callback finishes a consent: the vendor's redirect back to
// {public_url}/connect/callback with its query, in the browser whose
// BrowserCookie value is browser. The state is taken once, and only by
// the browser that opened the consent's start link: another browser's
// callback is refused and leaves the consent for that one. A forged,
// used or expired state, or one of an attempt the connection has moved
// past, changes nothing.
func (m *Manager) Callback(ctx context.Context, q url.Values, browser string) (connection.View, error) {
	state := q.Get("state")
	if state == "" {
		return connection.View{}, errStateInvalid
	}
	a, err := m.d.Authorizations.TakeAuthorization(ctx, state, browser, m.clock.Now())
	if errors.Is(err, connection.ErrNotFound) {
		return connection.View{}, errStateInvalid
	}
	if errors.Is(err, connection.ErrOtherBrowser) {
		m.log.Warn("a consent's callback came from a browser that did not start it: refused, the consent left for the one that did")
		return connection.View{}, errOtherBrowser
	}
	if err != nil {
		return connection.View{}, fmt.Errorf("take the consent awaited: %w", err)
	}
	release, err := m.hold(ctx, "connection/"+a.Connection)
	if err != nil {
		return connection.View{}, err
	}
	defer release()
	c, err := m.d.Connections.Connection(ctx, a.Connection)
	if errors.Is(err, connection.ErrNotFound) {
		return connection.View{}, errStateInvalid
	}
	if err != nil {
		return connection.View{}, fmt.Errorf("read connection: %w", err)
	}
	s, ok := Lookup(c.Role, c.System)
	if !awaits(c, a) || !ok || m.consent(s) == nil {
		return connection.View{}, errStateInvalid
	}
	if e := q.Get("error"); e != "" {
		return connection.View{}, m.refusedConsent(ctx, c, a, s, e)
	}
	code := q.Get("code")
	if code == "" {
		return connection.View{}, m.refusedConsent(ctx, c, a, s, "no_code")
	}
	tok, client, err := m.exchange(ctx, c, a, s, code)
	if err != nil {
		return connection.View{}, err
	}
	tenants, err := m.organisations(ctx, s, tok.AccessToken, q)
	if errors.Is(err, firmsystem.ErrNotReached) {
		// The callback was changed on its way through the browser, or
		// the vendor named what it did not grant: nothing of the grant
		// is kept.
		m.log.Warn("a consent's callback names an organisation its grant does not reach; nothing kept",
			zap.String("connection", c.ID), zap.String("firm", c.Firm), zap.String("system", s.Name))
		return connection.View{}, m.refusedConsent(ctx, c, a, s, "organisation_not_reached")
	}
	if err != nil {
		return connection.View{}, err
	}
	// The token is where the sync reads it before the connection says
	// connected.
	if err := oauthtoken.Seed(ctx, m.d.Upstream, client.Tokens, tokenConfig(c, client), tok); err != nil {
		return connection.View{}, err
	}
	c, err = m.write(ctx, c.ID, func(c *connection.Connection) error {
		if !awaits(*c, a) {
			return errStateInvalid
		}
		m.settle(c, s, tenants)
		return nil
	})
	if err != nil {
		m.forgetIfDisconnected(ctx, a.Connection, client)
		return connection.View{}, err
	}
	m.log.Info("connection consented", zap.String("connection", c.ID), zap.String("firm", c.Firm),
		zap.String("system", c.System), zap.String("status", string(c.Status)))
	return m.view(c, ""), nil
}

// exchange trades the consent's code for the grant's token, with the
// consent's PKCE verifier: a vendor's refusal (or a token without a refresh
// token) is noted on the connection as its consent refused; a token
// endpoint that fails or cannot be reached is unavailable.
func (m *Manager) exchange(ctx context.Context, c connection.Connection, a connection.Authorization, s System, code string) (*oauth2.Token, firmsystem.OAuthClient, error) {
	xctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, m.hc), exchangeTimeout)
	defer cancel()
	cfg, client := m.oauthConfig(s)
	tok, err := cfg.Exchange(xctx, code, oauth2.VerifierOption(a.Verifier))
	if err != nil {
		var refused *oauth2.RetrieveError
		if errors.As(err, &refused) && refused.Response != nil && refused.Response.StatusCode >= 500 {
			return nil, client, &practice.UnavailableError{Upstream: s.Name, Err: errors.New("the token endpoint failed")}
		}
		if errors.As(err, &refused) {
			// The library's error quotes the vendor's answer; only its
			// code is kept.
			return nil, client, m.refusedConsent(ctx, c, a, s, refused.ErrorCode)
		}
		var unreachable *url.Error
		if errors.As(err, &unreachable) {
			return nil, client, &practice.UnavailableError{Upstream: s.Name, Err: errors.New("the token endpoint could not be reached")}
		}
		return nil, client, upstream.Malformed(s.Name, "token", errors.New("the token endpoint's answer is not a token"))
	}
	if tok.RefreshToken == "" {
		m.log.Warn("the vendor's token has no refresh token: the app must ask for offline access", zap.String("system", s.Name),
			zap.String("connection", c.ID))
		return nil, client, m.refusedConsent(ctx, c, a, s, "no_refresh_token")
	}
	return tok, client, nil
}

// awaits reports whether c still waits for the consent a asked for.
func awaits(c connection.Connection, a connection.Authorization) bool {
	return c.Firm == a.Firm && c.Attempt == a.Attempt && c.Status == connection.Pending
}

// refusedConsent notes on the connection that the vendor did not give
// the consent (code is the OAuth2 error), which stays pending until it is
// reconnected.
func (m *Manager) refusedConsent(ctx context.Context, c connection.Connection, a connection.Authorization, s System, code string) error {
	if !oauthError.MatchString(code) {
		code = "unknown_error"
	}
	reason, answer := "consent denied at "+s.Label, error(errConsentDenied)
	if code != "access_denied" {
		// The vendor failed (server_error, temporarily_unavailable, an
		// answer without a code or refresh token): not the
		// administrator's refusal.
		reason = fmt.Sprintf("%s did not complete the consent (%s); reconnect to try again", s.Label, code)
		answer = apierror.New(http.StatusBadGateway, "upstream_unavailable",
			fmt.Sprintf("%s did not complete the consent (%s); reconnect to try again.", s.Label, code))
	}
	_, err := m.write(ctx, c.ID, func(c *connection.Connection) error {
		if !awaits(*c, a) {
			return errStateInvalid
		}
		c.Reason = reason
		return nil
	})
	if err != nil {
		return err
	}
	return answer
}

// settle gives a consented connection the organisation its grant reaches:
// the one it had (a reconnect), the only one, or the administrator's
// choice among several, or among all when a reconnect's grant no longer
// reaches the one it had.
func (m *Manager) settle(c *connection.Connection, s System, tenants []connection.Organisation) {
	now := m.clock.Now().UTC()
	connected := func(t connection.Organisation) {
		c.Status, c.Reason, c.Choices, c.OrganisationID, c.OrganisationName = connection.Connected, "", nil, t.ID, t.Name
		c.ConnectedAt = &now
	}
	if !s.Chooses {
		connected(connection.Organisation{})
		return
	}
	for _, t := range tenants {
		if c.OrganisationID != "" && t.ID == c.OrganisationID {
			connected(t)
			return
		}
	}
	if c.OrganisationID != "" && len(tenants) > 0 {
		// A reconnect whose consent does not reach the organisation
		// connected before: never another picked in its place, since its
		// records would replace the firm's copy. The administrator
		// chooses, or reconnects with an account that reaches it.
		before := c.OrganisationName
		if before == "" {
			before = "the organisation connected before"
		}
		c.Status, c.Choices = connection.ChooseOrganisation, tenants
		c.Reason = fmt.Sprintf("the new consent does not reach %s; choose the organisation to connect, or reconnect with an account that reaches it", before)
		return
	}
	switch len(tenants) {
	case 0:
		c.Status, c.Choices = connection.Pending, nil
		c.Reason = fmt.Sprintf("the consent reaches no %s organisation; reconnect with an account that has one", s.Label)
	case 1:
		connected(tenants[0])
	default:
		c.Status, c.Reason, c.Choices = connection.ChooseOrganisation, "choose the organisation to connect", tenants
	}
}

// organisations lists what a new grant reaches, with its access token,
// or what the callback's query names where the vendor names it there.
func (m *Manager) organisations(ctx context.Context, s System, accessToken string, callback url.Values) ([]connection.Organisation, error) {
	if !s.Chooses {
		return nil, nil
	}
	var orgs []firmsystem.Organisation
	var err error
	if named, ok := m.consent(s).(firmsystem.CallbackConsent); ok {
		orgs, err = named.CallbackOrganisations(ctx, m.vendorDeps(), s.Name, accessToken, callback)
	} else {
		orgs, err = m.consent(s).Organisations(ctx, m.vendorDeps(), s.Name, accessToken)
	}
	if errors.Is(err, practice.ErrNotFound) {
		// The vendor's not-found answers the gateway's own listing, not a
		// record the caller named: an answer the gateway cannot use.
		return nil, fmt.Errorf("%w: %s did not list what the grant reaches", practice.ErrBadUpstream, s.Label)
	}
	if err != nil {
		return nil, err
	}
	out := make([]connection.Organisation, 0, len(orgs))
	for _, o := range orgs {
		out = append(out, connection.Organisation{ID: o.ID, Name: o.Name})
	}
	return out, nil
}

// vendorDeps are what a vendor app's calls are made with: the deps'
// budget, clock and locks, on the Manager's transport.
func (m *Manager) vendorDeps() upstream.Deps {
	d := m.d.Upstream
	if m.hc.Transport != nil {
		d.Transport = m.hc.Transport
	}
	return d
}

// forgetIfDisconnected drops a token a callback seeded after the
// connection was disconnected meanwhile, so that none outlives it.
func (m *Manager) forgetIfDisconnected(ctx context.Context, id string, client firmsystem.OAuthClient) {
	c, err := m.d.Connections.Connection(ctx, id)
	if err != nil || c.Status != connection.Disconnected {
		return
	}
	if err := oauthtoken.Forget(ctx, m.d.Upstream, client.Tokens, tokenConfig(c, client)); err != nil {
		m.log.Error("a disconnected connection's token could not be forgotten", zap.String("connection", id), zap.Error(err))
	}
}
