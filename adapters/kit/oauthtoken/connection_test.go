package oauthtoken_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// A connection's token comes from its consent (Seed), is kept apart from
// every other connection's on the same app, and is gone once forgotten.
func TestConnectionTokensAreSeededAndKeptApart(t *testing.T) {
	ep := &tokenEndpoint{current: "rt-consent"}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	d := upstream.Deps{Clock: clock, State: changes.NewMemoryState()}
	ctx := context.Background()
	cfg := func(con string) upstream.OAuth2Config {
		return upstream.OAuth2Config{ClientID: "app", ClientSecret: "s3cret", Connection: con}
	}
	source := func(con string) *oauthtoken.Source {
		o, err := oauthtoken.New(oauthtoken.Xero, cfg(con), srv.URL, "basic", d)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}

	if tok, err := source("con_a").Token(ctx); !errors.Is(err, practice.ErrNeedsReconnect) {
		t.Fatalf("before the consent: token %q, %v; want ErrNeedsReconnect", tok, err)
	}
	consent := &oauth2.Token{AccessToken: "tok-consent", RefreshToken: "rt-consent", Expiry: time.Now().Add(30 * time.Minute)}
	if err := oauthtoken.Seed(ctx, d, oauthtoken.Xero, cfg("con_a"), consent); err != nil {
		t.Fatal(err)
	}
	a := source("con_a")
	if tok, err := a.Token(ctx); err != nil || tok != "tok-consent" || ep.grant(0) != "" {
		t.Fatalf("after the consent: token %q, %v, grant %q; want the consent's token and no grant", tok, err, ep.grant(0))
	}
	clock.Advance(29 * time.Minute)
	if tok, err := a.Token(ctx); err != nil || tok != "tok1" || ep.grant(0) != "refresh_token:rt-consent" {
		t.Fatalf("refresh: token %q, %v, grant %q", tok, err, ep.grant(0))
	}
	if got, err := oauthtoken.Stored(ctx, d, oauthtoken.Xero, cfg("con_a")); err != nil || got.RefreshToken != "rt1" {
		t.Fatalf("stored %+v, %v; want the rotated rt1", got, err)
	}
	if _, err := source("con_b").Token(ctx); !errors.Is(err, practice.ErrNeedsReconnect) {
		t.Fatalf("another connection on the same app took con_a's token: %v", err)
	}
	if err := oauthtoken.Forget(ctx, d, oauthtoken.Xero, cfg("con_a")); err != nil {
		t.Fatal(err)
	}
	if got, err := oauthtoken.Stored(ctx, d, oauthtoken.Xero, cfg("con_a")); err != nil || got != nil {
		t.Fatalf("after Forget: %+v, %v", got, err)
	}
	clock.Advance(time.Hour)
	if _, err := source("con_a").Token(ctx); !errors.Is(err, practice.ErrNeedsReconnect) {
		t.Fatalf("after Forget a new source got a token: %v", err)
	}
}
