package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/store/connection"
)

// A consent is bound to the browser that asked for it (RFC 6749
// §10.12). The administrator is given the gateway's own start link,
// {public_url}/connect/start/<token>, never the vendor's consent page:
// the link is single use, and the browser that follows it gets a cookie
// and is sent on to the vendor. The callback then finishes the consent
// only for the browser that holds that cookie, so a consent page passed
// to someone else (whose consent would connect the firm to their
// organisation) finishes nothing.
//
// The cookie is a random value whose SHA-256 the store keeps with the
// consent, rather than a MAC of the state under a gateway key: the check
// and the taking of the state are one atomic step of the store (a
// refusal leaves the consent as it was, for the right browser), no key
// has to be shared, rotated or kept from the log by every instance, and
// a copy of the store gives the cookie no more than it gives the state.
// A browser keeps one value for every consent it starts, so that two
// consents started side by side (the ledger and the documents) both
// finish.

// StartPath is where the start link is served, under public_url.
const StartPath = "/connect/start/"

// BrowserCookie names the cookie that binds a consent to its browser.
// Its path is /connect: the start link and the callback, nothing else.
const BrowserCookie = "practicegw_consent"

// browserValue is what the gateway puts in the cookie: 32 random bytes,
// base64url. A value of another shape is not one it made, and is
// replaced.
var browserValue = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// startToken is the shape of a start token (randomToken(32)).
var startToken = browserValue

var errStartInvalid = apierror.New(http.StatusBadRequest, "invalid_state",
	"This consent link was opened already, has expired (after 10 minutes) or was never sent; start the connection again from the console's Systems page.")

// errOtherBrowser refuses a callback whose browser did not open the
// consent's start link. The consent stays, for the browser that did.
var errOtherBrowser = apierror.New(http.StatusBadRequest, "invalid_state",
	"This consent was started in another browser: finish it in the browser that opened the gateway's consent link, or start the connection again from the console's Systems page.").WithParam("state")

// Started is where a start link sends its browser: the vendor's consent
// page (Location) and the cookie that binds the consent to the browser.
type Started struct {
	Location string
	Cookie   *http.Cookie
}

// startURL is the start link of a consent whose token is token.
func (m *Manager) startURL(token string) string {
	return strings.TrimRight(m.cfg.PublicURL, "/") + StartPath + token
}

// Start follows a start link: it spends token, binds its consent to the
// browser (browser is the value of its BrowserCookie, "" when it has
// none) and answers the vendor's consent page. A token that is unknown,
// spent or expired, or whose connection no longer waits for that
// consent, is refused.
func (m *Manager) Start(ctx context.Context, token, browser string) (Started, error) {
	if !startToken.MatchString(token) {
		return Started{}, errStartInvalid
	}
	if !browserValue.MatchString(browser) {
		browser = randomToken(32)
	}
	now := m.clock.Now()
	a, err := m.d.Authorizations.StartAuthorization(ctx, token, browser, now)
	if errors.Is(err, connection.ErrNotFound) {
		return Started{}, errStartInvalid
	}
	if err != nil {
		return Started{}, fmt.Errorf("start the consent awaited: %w", err)
	}
	c, err := m.d.Connections.Connection(ctx, a.Connection)
	if errors.Is(err, connection.ErrNotFound) {
		return Started{}, errStartInvalid
	}
	if err != nil {
		return Started{}, fmt.Errorf("read connection: %w", err)
	}
	s, ok := Lookup(c.Role, c.System)
	if !awaits(c, a) || !ok || m.consent(s) == nil {
		return Started{}, errStartInvalid
	}
	cfg, client := m.oauthConfig(s)
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(a.Verifier)}, client.Params...)
	return Started{
		Location: cfg.AuthCodeURL(a.OAuthState, opts...),
		Cookie: &http.Cookie{
			Name: BrowserCookie, Value: browser, Path: "/connect",
			// The browser keeps it as long as the consent it started lasts.
			MaxAge: max(1, int(a.Expires.Sub(now)/time.Second)), Expires: a.Expires.UTC(),
			HttpOnly: true, Secure: strings.HasPrefix(m.cfg.PublicURL, "https://"),
			// Lax: the vendor's redirect back is a top-level navigation
			// from another site, which Strict would send without it.
			SameSite: http.SameSiteLaxMode,
		},
	}, nil
}
