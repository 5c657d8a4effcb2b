package connect_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

// The attack a consent bound to its browser stops (RFC 6749 §10.12): an
// administrator of one firm starts a consent and passes the vendor's
// consent page to someone of another organisation, whose consent would
// connect the firm to that organisation. Their callback, without the
// cookie of the browser that opened the start link, or with their own,
// is refused on every instance, exchanges nothing and changes nothing;
// the consent still waits for the browser that started it, which then
// finishes it.
func TestConsentFinishesOnlyInTheBrowserThatStartedIt(t *testing.T) {
	h := newHarness(t)
	other := h.manager()
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	if !strings.HasPrefix(v.AuthorizeURL, "https://gw.example.com/connect/start/") {
		t.Fatalf("authorize_url %q is not the gateway's start link", v.AuthorizeURL)
	}
	if strings.Contains(v.AuthorizeURL, "state") {
		t.Fatalf("the start link carries the state: %s", v.AuthorizeURL)
	}
	redirect := h.allow(v.AuthorizeURL) // browser A opened the link
	h.secret(redirect.Get("state"))
	h.v.mu.Lock()
	exchanged := h.v.exchanges
	h.v.mu.Unlock()
	// Browser B: its own value of the cookie, or none at all.
	browserB := "YnJvd3Nlci1vZi1hbm90aGVyLW9yZ2FuaXNhdGlvbjE"
	for _, m := range []*connect.Manager{h.m, other} {
		for _, browser := range []string{browserB, "", "not-a-value-the-gateway-made"} {
			_, err := m.Callback(ctx, redirect, browser)
			h.wantAPIError(err, 400, "invalid_state", "state")
		}
	}
	h.v.mu.Lock()
	now := h.v.exchanges
	h.v.mu.Unlock()
	if now != exchanged {
		t.Fatalf("another browser's callback exchanged the code")
	}
	if c := h.stored(v.ID); c.Status != connection.Pending || c.Version != v.Version || c.Reason != v.Reason {
		t.Fatalf("another browser's callback changed the connection: %+v", c)
	}
	// A vendor error brought back to another browser changes nothing
	// either: it is not that browser's consent to refuse.
	_, err := other.Callback(ctx, url.Values{"error": {"access_denied"}, "state": {redirect.Get("state")}}, browserB)
	h.wantAPIError(err, 400, "invalid_state", "state")
	if c := h.stored(v.ID); c.Version != v.Version {
		t.Fatalf("another browser's refusal changed the connection: %+v", c)
	}
	// Browser A, on the other instance.
	if done := h.check(other.Callback(ctx, redirect, adminBrowser)); done.Status != connection.Connected || done.OrganisationID != "org-1" {
		t.Fatalf("browser A's callback: %+v", done.Connection)
	}
}

// A start link is used once, on any instance, expires with its consent,
// and is refused once its connection has moved past the attempt.
func TestStartLinkIsUsedOnce(t *testing.T) {
	h := newHarness(t)
	other := h.manager()
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	token := strings.TrimPrefix(v.AuthorizeURL, "https://gw.example.com/connect/start/")
	h.secret(token)
	h.consentPage(v.AuthorizeURL)
	for _, m := range []*connect.Manager{h.m, other} {
		_, err := m.Start(ctx, token, adminBrowser)
		h.wantAPIError(err, 400, "invalid_state", "")
	}
	for _, forged := range []string{"", "short", strings.Repeat("A", 43), token + "A"} {
		_, err := h.m.Start(ctx, forged, adminBrowser)
		h.wantAPIError(err, 400, "invalid_state", "")
	}

	// Expired: the link lasts as long as its consent, ten minutes.
	r := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	h.clock.Advance(connection.AuthorizationTTL)
	_, err := other.Start(ctx, strings.TrimPrefix(r.AuthorizeURL, "https://gw.example.com/connect/start/"), adminBrowser)
	h.wantAPIError(err, 400, "invalid_state", "")

	// An older attempt's link, after a reconnect asked for another.
	older := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	newer := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	_, err = h.open(other, older.AuthorizeURL)
	h.wantAPIError(err, 400, "invalid_state", "")
	if done := h.check(h.m.Callback(ctx, h.allow(newer.AuthorizeURL), adminBrowser)); done.Status != connection.Connected {
		t.Fatalf("the current attempt: %+v", done.Connection)
	}
}

// A browser without the gateway's cookie, or with a value the gateway did
// not make, is given a new random one; one with a value keeps it, so that
// two consents started side by side in one browser both finish.
func TestStartGivesABrowserOneValue(t *testing.T) {
	h := newHarness(t)
	a := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	b := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "dropbox"}))
	token := func(v connection.View) string {
		return strings.TrimPrefix(v.AuthorizeURL, "https://gw.example.com/connect/start/")
	}
	started, err := h.m.Start(ctx, token(a), "planted;value")
	if err != nil {
		t.Fatal(err)
	}
	browser := started.Cookie.Value
	h.secret(browser)
	if browser == "planted;value" || len(browser) != 43 {
		t.Fatalf("the browser was given %q", browser)
	}
	again, err := h.m.Start(ctx, token(b), browser)
	if err != nil || again.Cookie.Value != browser {
		t.Fatalf("the second consent's cookie: %+v, %v", again.Cookie, err)
	}
	for _, page := range []string{started.Location, again.Location} {
		if done := h.check(h.m.Callback(ctx, h.v.consent(page), browser)); done.Status != connection.Connected {
			t.Fatalf("after the consent: %+v", done.Connection)
		}
	}
}
