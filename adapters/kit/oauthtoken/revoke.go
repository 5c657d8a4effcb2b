package oauthtoken

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// Revoke ends at the vendor the grant saved for system and cfg (a
// connection's): RFC 7009 with its refresh token at revokeURL, the client
// authenticating as style says it does at the token endpoint; caller is
// the system that calls (its budget and metrics). A grant with no token
// saved has nothing to revoke.
func Revoke(ctx context.Context, d upstream.Deps, caller, system string, cfg upstream.OAuth2Config, revokeURL string, style oauth2.AuthStyle) error {
	tok, err := Stored(ctx, d, system, cfg)
	if err != nil || tok == nil {
		return err
	}
	form := url.Values{"token": {tok.RefreshToken}, "token_type_hint": {"refresh_token"}}
	var header http.Header
	if style == oauth2.AuthStyleInParams {
		form.Set("client_id", cfg.ClientID)
		form.Set("client_secret", cfg.ClientSecret)
	} else {
		req, _ := http.NewRequest(http.MethodPost, revokeURL, nil)
		req.SetBasicAuth(url.QueryEscape(cfg.ClientID), url.QueryEscape(cfg.ClientSecret))
		header = http.Header{"Authorization": req.Header["Authorization"]}
	}
	c, err := upstream.NewClient(upstream.Options{System: caller, BaseURL: Origin(revokeURL)}, d)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, upstream.Request{Method: http.MethodPost, Path: revokeURL, Header: header,
		Body: []byte(form.Encode()), ContentType: "application/x-www-form-urlencoded"})
	if err != nil {
		// The error quotes the path only; the token was in the body.
		return fmt.Errorf("revoke the grant: %w", err)
	}
	return nil
}

// Origin is scheme://host of an endpoint's URL, the base of the client
// that calls it.
func Origin(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Scheme + "://" + p.Host
}
