package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// OAuth2Config is how an adapter gets its bearer token. Set AccessToken for
// a token that some other process keeps fresh; otherwise the adapter runs
// the client-credentials grant (no RefreshToken: Microsoft Graph app-only,
// Xero custom connections) or the refresh-token grant (Xero, Google,
// Dropbox offline access) itself. Secrets may hold {env.X} placeholders,
// which the Caddy wiring expands.
type OAuth2Config struct {
	AccessToken  string   `json:"access_token,omitempty"`
	TokenURL     string   `json:"token_url,omitempty"`
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	RefreshToken string   `json:"refresh_token,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	// AuthStyle is how the client authenticates to the token endpoint:
	// "basic" (HTTP Basic, which Xero requires) or "body" (form fields)
	// [the vendor's default].
	AuthStyle string `json:"auth_style,omitempty"`
}

// Configured reports whether any way to a token is set.
func (c OAuth2Config) Configured() bool {
	return c.AccessToken != "" || c.TokenURL != "" && c.ClientID != ""
}

// OAuth2 is an Authorizer sending "Authorization: Bearer <token>" and
// renewing the token a minute before it expires. A refresh token the
// vendor rotates (Xero does, and the old one stops working) is kept in the
// StateStore, so a restart carries on with the newest.
type OAuth2 struct {
	cfg      OAuth2Config
	hc       *http.Client
	state    StateStore
	stateKey string
	clock    Clock

	mu      sync.Mutex
	token   string
	expiry  time.Time
	refresh string
}

// NewOAuth2 makes the token source for cfg; tokenURL and authStyle are the
// vendor's defaults for fields cfg leaves empty. system names the vendor in
// errors and in the state key.
func NewOAuth2(system string, cfg OAuth2Config, tokenURL, authStyle string, d Deps) (*OAuth2, error) {
	if cfg.TokenURL == "" {
		cfg.TokenURL = tokenURL
	}
	if cfg.AuthStyle == "" {
		cfg.AuthStyle = authStyle
	}
	if !cfg.Configured() {
		return nil, fmt.Errorf("%s: set access_token, or client_id and client_secret (and refresh_token for the refresh grant)", system)
	}
	if cfg.AuthStyle != "basic" && cfg.AuthStyle != "body" {
		return nil, fmt.Errorf("%s: auth_style %q must be basic or body", system, cfg.AuthStyle)
	}
	return &OAuth2{
		cfg:      cfg,
		hc:       &http.Client{Timeout: 15 * time.Second},
		state:    d.state(),
		stateKey: "oauth2/" + system + "/" + cfg.ClientID + "/refresh_token",
		clock:    d.clock(),
		token:    cfg.AccessToken,
	}, nil
}

func (o *OAuth2) Authorize(ctx context.Context, h http.Header) error {
	tok, err := o.Token(ctx)
	if err != nil {
		return err
	}
	h.Set("Authorization", "Bearer "+tok)
	return nil
}

// Token returns a current access token, fetching one when needed. One
// caller fetches at a time; the others wait for its token.
func (o *OAuth2) Token(ctx context.Context) (string, error) {
	if o.cfg.AccessToken != "" {
		return o.cfg.AccessToken, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.token != "" && o.clock.Now().Before(o.expiry.Add(-time.Minute)) {
		return o.token, nil
	}
	form := url.Values{}
	if o.cfg.RefreshToken != "" {
		if o.refresh == "" {
			saved, err := o.state.Last(ctx, o.stateKey)
			if err != nil {
				return "", fmt.Errorf("load refresh token: %w", err)
			}
			o.refresh = o.cfg.RefreshToken
			if len(saved) > 0 {
				o.refresh = string(saved)
			}
		}
		form.Set("grant_type", "refresh_token")
		form.Set("refresh_token", o.refresh)
	} else {
		form.Set("grant_type", "client_credentials")
	}
	if len(o.cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(o.cfg.Scopes, " "))
	}
	if o.cfg.AuthStyle == "body" {
		form.Set("client_id", o.cfg.ClientID)
		form.Set("client_secret", o.cfg.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if o.cfg.AuthStyle == "basic" {
		req.SetBasicAuth(url.QueryEscape(o.cfg.ClientID), url.QueryEscape(o.cfg.ClientSecret))
	}
	resp, err := o.hc.Do(req)
	if err != nil {
		return "", &UnavailableError{Upstream: "oauth2 token endpoint", Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", &UnavailableError{Upstream: "oauth2 token endpoint", Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return "", &UnavailableError{Upstream: "oauth2 token endpoint",
			Err: fmt.Errorf("%s answered %d: %.200s", o.cfg.TokenURL, resp.StatusCode, body)}
	}
	var tok struct {
		AccessToken  string `json:"access_token"`
		ExpiresIn    int64  `json:"expires_in"`
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		return "", Malformed("oauth2 token endpoint", "token", errors.Join(err, errors.New("no access_token")))
	}
	if tok.ExpiresIn <= 0 {
		tok.ExpiresIn = 3600
	}
	o.token, o.expiry = tok.AccessToken, o.clock.Now().Add(time.Duration(tok.ExpiresIn)*time.Second)
	if tok.RefreshToken != "" && tok.RefreshToken != o.refresh {
		o.refresh = tok.RefreshToken
		if err := o.state.Save(ctx, o.stateKey, []byte(tok.RefreshToken)); err != nil {
			return "", fmt.Errorf("save rotated refresh token: %w", err)
		}
	}
	return o.token, nil
}
