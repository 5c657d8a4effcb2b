// Package oauthtoken gets and renews the OAuth2 bearer tokens that vendor
// APIs take (Xero, Microsoft Graph, Google Drive, Dropbox), keeping a
// refresh token the vendor rotates where every gateway instance finds it.
package oauthtoken

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Source is an upstream.Authorizer sending "Authorization: Bearer <token>" and
// renewing the token a minute before it expires. golang.org/x/oauth2 runs
// the grants; OAuth2 adds what the library leaves to its caller: a refresh
// token the vendor rotates (Xero, Microsoft and Dropbox do, and the old one
// stops working) is kept in the StateStore, so a restart, or another
// gateway sharing the store, carries on with the newest.
//
// The token request goes through the http.Client that the caller's context
// carries under oauth2.HTTPClient (upstream.Client puts its own there, so the
// transport, the attempt's timeout and the breaker apply), and is canceled
// with that context: the library's ReuseTokenSource would instead keep the
// context of the first call for every later refresh.
type Source struct {
	cfg      upstream.OAuth2Config
	style    oauth2.AuthStyle
	state    changes.StateStore
	stateKey string
	clock    upstream.Clock

	// mu makes one caller fetch at a time while the others wait for its
	// token, as oauth2.ReuseTokenSource does.
	mu      sync.Mutex
	token   string
	expiry  time.Time // on clock, which tests move by hand
	refresh string    // the newest refresh token; empty until first loaded
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
	return &Source{
		cfg:      cfg,
		style:    style,
		state:    d.StateStore(),
		stateKey: "oauth2/" + system + "/" + cfg.ClientID + "/refresh_token",
		clock:    d.ClockOrSystem(),
		token:    cfg.AccessToken,
	}, nil
}

func (o *Source) Authorize(ctx context.Context, h http.Header) error {
	tok, err := o.Token(ctx)
	if err != nil {
		return err
	}
	h.Set("Authorization", "Bearer "+tok)
	return nil
}

// Token returns a current access token, fetching one when needed.
func (o *Source) Token(ctx context.Context) (string, error) {
	if o.cfg.AccessToken != "" {
		return o.cfg.AccessToken, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.token != "" && o.clock.Now().Before(o.expiry.Add(-time.Minute)) {
		return o.token, nil
	}
	if _, ok := ctx.Value(oauth2.HTTPClient).(*http.Client); !ok {
		// The library would fall back to http.DefaultClient, which has no
		// timeout at all.
		ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: 15 * time.Second})
	}
	if o.cfg.RefreshToken != "" && o.refresh == "" {
		saved, err := o.state.Last(ctx, o.stateKey)
		if err != nil {
			return "", fmt.Errorf("load refresh token: %w", err)
		}
		o.refresh = o.cfg.RefreshToken
		if len(saved) > 0 {
			o.refresh = string(saved)
		}
	}
	tok, err := o.grant(ctx)
	if err != nil {
		return "", tokenError(o.cfg.TokenURL, err)
	}
	// The library dates the expiry by the wall clock; count the lifetime
	// on ours.
	life := time.Hour
	if !tok.Expiry.IsZero() {
		life = time.Until(tok.Expiry)
	}
	o.token, o.expiry = tok.AccessToken, o.clock.Now().Add(life)
	if tok.RefreshToken != "" && tok.RefreshToken != o.refresh {
		o.refresh = tok.RefreshToken
		if err := o.state.Save(ctx, o.stateKey, []byte(tok.RefreshToken)); err != nil {
			return "", fmt.Errorf("save rotated refresh token: %w", err)
		}
	}
	return o.token, nil
}

// grant runs the client-credentials grant, or the refresh-token grant with
// the newest refresh token (the one saved by any instance, else the
// configured one).
func (o *Source) grant(ctx context.Context) (*oauth2.Token, error) {
	if o.cfg.RefreshToken == "" {
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

// tokenError says what a failed grant means for the request waiting on it:
// the token endpoint refused or could not be reached (the upstream is
// unavailable), or answered something that is not a token.
func tokenError(tokenURL string, err error) error {
	const endpoint = "oauth2 token endpoint"
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
