package connect_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

var ctx = context.Background()

// wantAPIError checks err is the contract error status/code (param when
// given), and that it shows no secret.
func (h *harness) wantAPIError(err error, status int, code, param string) *apierror.Error {
	h.t.Helper()
	e, ok := apierror.From(err)
	if !ok || e.Status != status || e.Code != code || (param != "" && e.Param != param) {
		h.t.Fatalf("error %v; want %d %s (param %q)", err, status, code, param)
	}
	b, _ := json.Marshal(e)
	h.noSecretIn("error", string(b)+err.Error())
	return e
}

func (h *harness) stored(id string) connection.Connection {
	h.t.Helper()
	c, err := h.store.Connection(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) token(c connection.Connection, system, client string) *string {
	h.t.Helper()
	tok, err := oauthtoken.Stored(ctx, upstream.Deps{State: h.state}, system,
		upstream.OAuth2Config{ClientID: client, Connection: c.ID})
	if err != nil {
		h.t.Fatal(err)
	}
	if tok == nil {
		return nil
	}
	return &tok.RefreshToken
}

// The whole Xero consent: a pending connection and its consent page
// (PKCE S256, the gateway's callback, offline access), the callback
// exchanging the code with the verifier the token endpoint checks, the
// one organisation chosen, the token seeded where the sync reads it.
func TestXeroConsentConnectsTheOneOrganisation(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	if v.Status != connection.Pending || v.Attempt != 1 || !strings.HasPrefix(v.ID, "con_") || len(v.ID) != 28 {
		t.Fatalf("connect: %+v", v.Connection)
	}
	page := h.consentPage(v.AuthorizeURL)
	u, _ := url.Parse(page)
	q := u.Query()
	if u.Path != "/authorize" || q.Get("redirect_uri") != "https://gw.example.com/connect/callback" ||
		q.Get("client_id") != "xero" || !strings.Contains(q.Get("scope"), "offline_access") || len(q.Get("state")) != 43 {
		t.Fatalf("consent page %s", page)
	}
	if got := h.check(h.m.Get(ctx, "frm_a", v.ID)); got.AuthorizeURL != "" || len(got.Sync) != 1 {
		t.Fatalf("GET shows %+v", got)
	}
	done := h.check(h.m.Callback(ctx, h.v.consent(page), adminBrowser))
	if done.Status != connection.Connected || done.OrganisationID != "org-1" || done.OrganisationName != "Hollis Ledger" ||
		done.ConnectedAt == nil || done.Reason != "" {
		t.Fatalf("after the consent: %+v", done.Connection)
	}
	if rt := h.token(done.Connection, oauthtoken.Xero, "xero"); rt == nil || !strings.HasPrefix(*rt, "rt-") {
		t.Fatalf("seeded token %v", rt)
	}
}

// A state that is forged, used already, expired, or of an attempt the
// connection has moved past is refused, and changes nothing.
func TestCallbackRefusesForgedReplayedExpiredAndStaleStates(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	cb := h.allow(v.AuthorizeURL)

	forged := url.Values{"code": cb["code"], "state": {"AAAA" + cb.Get("state")[4:]}}
	_, err := h.m.Callback(ctx, forged, adminBrowser)
	h.wantAPIError(err, 400, "invalid_state", "state")
	_, err = h.m.Callback(ctx, url.Values{"code": cb["code"]}, adminBrowser)
	h.wantAPIError(err, 400, "invalid_state", "state")
	if c := h.stored(v.ID); c.Status != connection.Pending || c.Version != 1 {
		t.Fatalf("a forged state changed the connection: %+v", c)
	}

	h.check(h.m.Callback(ctx, cb, adminBrowser))
	_, err = h.m.Callback(ctx, cb, adminBrowser)
	h.wantAPIError(err, 400, "invalid_state", "state")

	// Expired: ten minutes is the whole consent.
	v2 := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "dropbox"}))
	cb2 := h.allow(v2.AuthorizeURL)
	h.clock.Advance(connection.AuthorizationTTL)
	_, err = h.m.Callback(ctx, cb2, adminBrowser)
	h.wantAPIError(err, 400, "invalid_state", "state")
	if c := h.stored(v2.ID); c.Status != connection.Pending || h.token(c, oauthtoken.Dropbox, "dbx") != nil {
		t.Fatalf("an expired state connected: %+v", c)
	}

	// An older attempt's consent, after a reconnect asked for another.
	old := h.allow(h.check(h.m.Update(ctx, "frm_a", v2.ID, connection.Request{Reconnect: true})).AuthorizeURL)
	newer := h.check(h.m.Update(ctx, "frm_a", v2.ID, connection.Request{Reconnect: true}))
	_, err = h.m.Callback(ctx, old, adminBrowser)
	h.wantAPIError(err, 400, "invalid_state", "state")
	if c := h.stored(v2.ID); c.Status != connection.Pending || c.Attempt != 3 {
		t.Fatalf("a stale attempt's consent changed the connection: %+v", c)
	}
	if done := h.check(h.m.Callback(ctx, h.allow(newer.AuthorizeURL), adminBrowser)); done.Status != connection.Connected {
		t.Fatalf("the current attempt: %+v", done.Connection)
	}
}

// Two instances given the same callback at once (a browser that posts
// twice, a load balancer retrying): exactly one exchanges the code and
// connects; the other is refused. Run many times for many interleavings.
func TestTwoInstancesRacingOneCallbackConnectOnce(t *testing.T) {
	h := newHarness(t)
	other := h.manager()
	for i := range 30 {
		role, system := "ledger", "xero"
		if i%2 == 1 {
			role, system = "documents", "google_drive"
		}
		v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: role, System: system}))
		cb := h.allow(v.AuthorizeURL)
		h.v.mu.Lock()
		before := h.v.exchanges
		h.v.mu.Unlock()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, m := range []*connect.Manager{h.m, other} {
			wg.Go(func() { _, errs[j] = m.Callback(ctx, cb, adminBrowser) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				h.wantAPIError(err, 400, "invalid_state", "state")
			}
		}
		h.v.mu.Lock()
		exchanged := h.v.exchanges - before
		h.v.mu.Unlock()
		if c := h.stored(v.ID); won != 1 || exchanged != 1 || c.Status != connection.Connected {
			t.Fatalf("round %d: %d won, %d exchanges, %+v", i, won, exchanged, c)
		}
		h.check(h.m.Disconnect(ctx, "frm_a", v.ID))
	}
}

// A grant reaching several organisations waits for the administrator's
// choice, which must be one of them; a reconnect then chooses the same
// organisation again by itself.
func TestChooseOrganisationThenReconnectKeepsIt(t *testing.T) {
	h := newHarness(t)
	h.v.tenants = append(h.v.tenants, map[string]string{"id": "c2", "tenantId": "org-2", "tenantType": "ORGANISATION", "tenantName": "Hollis Practice"})
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "xpm"}))
	waiting := h.check(h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser))
	if waiting.Status != connection.ChooseOrganisation || len(waiting.Choices) != 2 || waiting.OrganisationID != "" {
		t.Fatalf("two organisations: %+v", waiting.Connection)
	}
	_, err := h.m.Update(ctx, "frm_a", v.ID, connection.Request{OrganisationID: "org-9"})
	h.wantAPIError(err, 400, "parameter_invalid", "tenant_id")
	chosen := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{OrganisationID: "org-2"}))
	if chosen.Status != connection.Connected || chosen.OrganisationName != "Hollis Practice" || chosen.Choices != nil {
		t.Fatalf("chosen: %+v", chosen.Connection)
	}
	_, err = h.m.Update(ctx, "frm_a", v.ID, connection.Request{OrganisationID: "org-1"})
	h.wantAPIError(err, 409, "connection_state", "")

	again := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	if again.Status != connection.Pending || !strings.Contains(again.Reason, "a reconnect waits") || again.Attempt != 2 || again.OrganisationID != "org-2" || again.AuthorizeURL == "" {
		t.Fatalf("reconnect: %+v", again)
	}
	back := h.check(h.m.Callback(ctx, h.allow(again.AuthorizeURL), adminBrowser))
	if back.Status != connection.Connected || back.OrganisationID != "org-2" {
		t.Fatalf("after the reconnect: %+v", back.Connection)
	}
}

// SharePoint's grant reaches sites: one is chosen; none leaves the
// connection pending with a reason.
func TestSharePointSites(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "sharepoint"}))
	none := h.check(h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser))
	if none.Status != connection.Pending || !strings.Contains(none.Reason, "no SharePoint organisation") {
		t.Fatalf("no site: %+v", none.Connection)
	}
	h.v.sites = []map[string]string{{"id": "contoso.sharepoint.com,1,2", "displayName": "Clients"}}
	again := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	one := h.check(h.m.Callback(ctx, h.allow(again.AuthorizeURL), adminBrowser))
	if one.Status != connection.Connected || one.OrganisationID != "contoso.sharepoint.com,1,2" || one.OrganisationName != "Clients" {
		t.Fatalf("one site: %+v", one.Connection)
	}
	// The site is not a drive: the connection opens as the site, whose
	// default document library Graph names (GET /sites/{site}/drive),
	// under Graph's v1.0 API of the app's base_url.
	raw, err := h.cfg.ModuleConfig(ctx, h.state, h.stored(v.ID))
	if err != nil {
		t.Fatal(err)
	}
	var opened struct {
		DriveID string `json:"drive_id"`
		SiteID  string `json:"site_id"`
		BaseURL string `json:"base_url"`
	}
	if err := json.Unmarshal(raw, &opened); err != nil {
		t.Fatal(err)
	}
	if opened.SiteID != "contoso.sharepoint.com,1,2" || opened.DriveID != "" || opened.BaseURL != h.v.URL()+"/v1.0" {
		t.Errorf("the connection opens as %s", raw)
	}
}

// A vendor that answers its organisations' listing with not found has
// given an answer the gateway cannot use: 502, never the 404 of a record
// the caller named, and the connection waits for another consent.
func TestOrganisationsNotFoundIsUpstream(t *testing.T) {
	h := newHarness(t)
	h.v.missing["/v1.0/sites"] = true
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "sharepoint"}))
	_, err := h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser)
	h.wantAPIError(err, 502, "upstream_unavailable", "")
	if c := h.stored(v.ID); c.Status != connection.Pending {
		t.Fatalf("after the vendor's not found: %+v", c)
	}
}

// A consent refused at the vendor leaves the connection pending with the
// reason, and answers consent_denied.
func TestConsentDenied(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	state := h.allow(v.AuthorizeURL).Get("state")
	_, err := h.m.Callback(ctx, url.Values{"error": {"access_denied"}, "state": {state}}, adminBrowser)
	h.wantAPIError(err, 400, "consent_denied", "")
	if c := h.stored(v.ID); c.Status != connection.Pending || c.Reason != "consent denied at Xero" {
		t.Fatalf("denied: %+v", c)
	}
}

// A disconnect written while the consent is being finished (by an
// instance whose hold expired) wins: the callback's write is refused on
// the version it read, it reads again, finds the connection disconnected,
// and forgets the token it seeded.
func TestCallbackLosesToADisconnectMeanwhile(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	cb := h.allow(v.AuthorizeURL)
	h.store.beforeUpdate = func() {
		c := h.stored(v.ID)
		c.Status = connection.Disconnected
		if _, err := h.store.UpdateConnection(ctx, c, c.Version); err != nil {
			t.Error(err)
		}
	}
	_, err := h.m.Callback(ctx, cb, adminBrowser)
	h.wantAPIError(err, 400, "invalid_state", "state")
	c := h.stored(v.ID)
	if c.Status != connection.Disconnected || h.token(c, oauthtoken.Xero, "xero") != nil {
		t.Fatalf("after the race: %+v, token %v", c, h.token(c, oauthtoken.Xero, "xero"))
	}
}

// What a connect request may not ask, each with its contract error.
func TestConnectRefusals(t *testing.T) {
	h := newHarness(t)
	live := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	cases := []struct {
		name                string
		firm                string
		r                   connection.Request
		status              int
		code, param, phrase string
	}{
		{"no role", "frm_a", connection.Request{System: "xero"}, 400, "parameter_missing", "role", ""},
		{"unknown role", "frm_a", connection.Request{Role: "payroll", System: "xero"}, 400, "parameter_invalid", "role", ""},
		{"system of another role", "frm_a", connection.Request{Role: "records", System: "xero"}, 400, "parameter_invalid", "system", ""},
		{"unknown system", "frm_a", connection.Request{Role: "documents", System: "box"}, 400, "parameter_invalid", "system", ""},
		{"karbon without key", "frm_a", connection.Request{Role: "records", System: "karbon"}, 400, "parameter_missing", "access_key", ""},
		{"key for an oauth system", "frm_a", connection.Request{Role: "documents", System: "dropbox", AccessKey: "x"}, 400, "parameter_invalid", "access_key", ""},
		{"tenant on connect", "frm_a", connection.Request{Role: "documents", System: "dropbox", OrganisationID: "x"}, 400, "parameter_invalid", "tenant_id", ""},
		{"unknown firm", "frm_zz", connection.Request{Role: "ledger", System: "xero"}, 404, "resource_not_found", "", ""},
		{"role the Caddyfile sets", "frm_b", connection.Request{Role: "ledger", System: "xero"}, 409, "role_configured", "role", "Caddyfile"},
		{"role connected", "frm_a", connection.Request{Role: "ledger", System: "xero"}, 409, "role_connected", "role", "disconnect " + live.ID + " first"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.m.Connect(ctx, c.firm, c.r)
			e := h.wantAPIError(err, c.status, c.code, c.param)
			if !strings.Contains(e.Message, c.phrase) {
				t.Errorf("message %q does not say %q", e.Message, c.phrase)
			}
		})
	}
	unregistered := connect.New(&connect.Config{PublicURL: "https://gw.example.com"}, connect.Deps{
		Connections: h.store, Authorizations: h.store, Firms: firms{}})
	_, err := unregistered.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "onedrive"})
	if e := h.wantAPIError(err, 409, "system_not_registered", "system"); !strings.Contains(e.Message, "connect block") {
		t.Errorf("message %q", e.Message)
	}
	for _, f := range []func() error{
		func() error { _, err := h.m.Get(ctx, "frm_b", live.ID); return err },
		func() error { _, err := h.m.Disconnect(ctx, "frm_b", live.ID); return err },
		func() error {
			_, err := h.m.Update(ctx, "frm_b", live.ID, connection.Request{Reconnect: true})
			return err
		},
		func() error { _, err := h.m.Get(ctx, "frm_a", "con_unknown"); return err },
	} {
		h.wantAPIError(f(), 404, "resource_not_found", "")
	}
}

// Administrators racing to connect one role, on two instances, get one
// connection; the others are told which to disconnect first.
func TestConcurrentConnectsOfOneRoleMakeOne(t *testing.T) {
	h := newHarness(t)
	ms := []*connect.Manager{h.m, h.manager()}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = ms[i%2].Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "google_drive"})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		h.wantAPIError(err, 409, "role_connected", "role")
	}
	cs, _ := h.store.Connections(ctx, "frm_a")
	if won != 1 || len(cs) != 1 {
		t.Fatalf("%d connects won, %d connections stored", won, len(cs))
	}
}

// Google asks for offline access with a consent prompt, Dropbox for an
// offline token: each vendor's way to a refresh token.
func TestConsentPagesAskForOfflineAccess(t *testing.T) {
	h := newHarness(t)
	g := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "google_drive"}))
	if q := mustQuery(t, h.consentPage(g.AuthorizeURL)); q.Get("access_type") != "offline" || q.Get("prompt") != "consent" {
		t.Errorf("google: %s", g.AuthorizeURL)
	}
	h.check(h.m.Disconnect(ctx, "frm_a", g.ID))
	d := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "dropbox"}))
	if q := mustQuery(t, h.consentPage(d.AuthorizeURL)); q.Get("token_access_type") != "offline" {
		t.Errorf("dropbox: %s", d.AuthorizeURL)
	}
}

func mustQuery(t *testing.T, u string) url.Values {
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Query()
}

// Disconnecting revokes at the vendor with the vendor's own call, forgets
// the token, purges the copy and says who disconnected; a vendor that
// cannot be reached does not stop it, and the reason says so.
func TestDisconnectRevokesAndPurges(t *testing.T) {
	h := newHarness(t)
	connectOAuth := func(role, system string) connection.View {
		v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: role, System: system}))
		return h.check(h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser))
	}
	x := connectOAuth("ledger", "xero")
	rt := *h.token(x.Connection, oauthtoken.Xero, "xero")
	admin := connect.Actor{Name: "Console", Credential: "crd_admin1", Where: "in the console"}
	gone := h.check(h.m.Disconnect(connect.WithActor(ctx, admin), "frm_a", x.ID))
	if gone.Status != connection.Disconnected || gone.Reason != "disconnected by Console (credential crd_admin1) in the console" {
		t.Fatalf("disconnected: %+v", gone.Connection)
	}
	if h.token(x.Connection, oauthtoken.Xero, "xero") != nil {
		t.Fatal("the token outlived the disconnect")
	}
	if len(h.v.revoked) != 1 || h.v.revoked[0] != rt+" basic=true client=xero" {
		t.Fatalf("revoked %q; want the refresh token, the client in Basic auth", h.v.revoked)
	}
	if p := h.rt.purges(); len(p) != 1 || p[0] != x.ID {
		t.Fatalf("purged %v", p)
	}
	if again := h.check(h.m.Disconnect(ctx, "frm_a", x.ID)); again.Reason != gone.Reason || len(h.rt.purges()) != 1 {
		t.Fatalf("a second disconnect changed something: %+v", again.Connection)
	}

	d := connectOAuth("documents", "dropbox")
	h.check(h.m.Disconnect(ctx, "frm_a", d.ID))
	if len(h.v.revoked) != 2 || !strings.HasPrefix(h.v.revoked[1], "at-") {
		t.Fatalf("dropbox revoked %q; want its access token", h.v.revoked)
	}

	h.v.revokeFail = true
	g := connectOAuth("documents", "google_drive")
	down := h.check(h.m.Disconnect(ctx, "frm_a", g.ID))
	if down.Status != connection.Disconnected || !strings.Contains(down.Reason, "Google Drive could not be reached to revoke") ||
		h.token(g.Connection, oauthtoken.GDrive, "google") != nil || len(h.rt.purges()) != 3 {
		t.Fatalf("revocation down: %+v", down.Connection)
	}

	// Microsoft offers no revocation: nothing is called, the rest is done.
	h.v.revokeFail = false
	s := connectOAuth("documents", "onedrive")
	if s.Status != connection.Connected {
		t.Fatalf("onedrive: %+v", s.Connection)
	}
	out := h.check(h.m.Disconnect(ctx, "frm_a", s.ID))
	if out.Reason != "disconnected by the gateway's operator with practicegw connect disconnect" || len(h.v.revoked) != 2 {
		t.Fatalf("onedrive: %+v, revoked %q", out.Connection, h.v.revoked)
	}
}

// A purge that fails leaves the connection as it was, to be disconnected
// again.
func TestDisconnectWaitsForThePurge(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "dropbox"}))
	h.rt.fail = errors.New("store down")
	if _, err := h.m.Disconnect(ctx, "frm_a", v.ID); err == nil {
		t.Fatal("disconnected without purging")
	}
	if c := h.stored(v.ID); c.Status != connection.Pending {
		t.Fatalf("%+v", c)
	}
	h.rt.fail = nil
	if c := h.check(h.m.Disconnect(ctx, "frm_a", v.ID)); c.Status != connection.Disconnected {
		t.Fatalf("%+v", c.Connection)
	}
}

// An answer from the vendor the gateway cannot use is a 502 with the
// contract's body, never a 500, and leaves the connection waiting.
func TestUnusableVendorAnswersAre502(t *testing.T) {
	for _, path := range []string{"/token", "/connections"} {
		t.Run(path, func(t *testing.T) {
			h := newHarness(t)
			h.v.garbage[path] = true
			v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
			_, err := h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser)
			h.wantAPIError(err, 502, "upstream_unavailable", "")
			if c := h.stored(v.ID); c.Status != connection.Pending || h.token(c, oauthtoken.Xero, "xero") != nil {
				t.Fatalf("after an unusable answer: %+v", c)
			}
		})
	}
}

// A token endpoint that is down is a 503 to try again, not the
// administrator's doing.
func TestTokenEndpointDownIs503(t *testing.T) {
	h := newHarness(t)
	h.v.down["/token"] = true
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	_, err := h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser)
	h.wantAPIError(err, 503, "upstream_unavailable", "")
	if c := h.stored(v.ID); c.Status != connection.Pending {
		t.Fatalf("%+v", c)
	}
}

// List shows the firm's connections alone, oldest first; Update refuses
// what it cannot do, each with its parameter.
func TestListAndUpdateRefusals(t *testing.T) {
	h := newHarness(t)
	a := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	b := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "documents", System: "dropbox"}))
	h.check(h.m.Connect(ctx, "frm_b", connection.Request{Role: "documents", System: "dropbox"}))
	list, err := h.m.List(ctx, "frm_a")
	if err != nil || len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID || list[0].AuthorizeURL != "" {
		t.Fatalf("list %+v, %v", list, err)
	}
	_, err = h.m.List(ctx, "frm_zz")
	h.wantAPIError(err, 404, "resource_not_found", "")
	for _, c := range []struct {
		r           connection.Request
		code, param string
	}{
		{connection.Request{Role: "records", Reconnect: true}, "parameter_invalid", "role"},
		{connection.Request{System: "google_drive", Reconnect: true}, "parameter_invalid", "system"},
		{connection.Request{OrganisationID: "org-1", Reconnect: true}, "parameter_invalid", "tenant_id"},
		{connection.Request{}, "parameter_invalid", "reconnect"},
		{connection.Request{Reconnect: true, AccessKey: "k"}, "parameter_invalid", "access_key"},
	} {
		_, err := h.m.Update(ctx, "frm_a", a.ID, c.r)
		h.wantAPIError(err, 400, c.code, c.param)
	}
	h.check(h.m.Disconnect(ctx, "frm_a", a.ID))
	_, err = h.m.Update(ctx, "frm_a", a.ID, connection.Request{Reconnect: true})
	h.wantAPIError(err, 409, "connection_state", "")
	// The role is free again once disconnected.
	h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
}

// A grant the vendor refused turns a connected connection needs_reconnect
// with the gateway's reason; one pending or disconnected is left alone;
// a reconnect's consent connects it again.
func TestNeedsReconnect(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	if err := h.m.NeedsReconnect(ctx, v.ID, "Xero refused the connection's grant"); err != nil {
		t.Fatal(err)
	}
	if c := h.stored(v.ID); c.Status != connection.Pending {
		t.Fatalf("a pending connection changed: %+v", c)
	}
	h.check(h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser))
	if err := h.m.NeedsReconnect(ctx, v.ID, "Xero refused the connection's grant"); err != nil {
		t.Fatal(err)
	}
	c := h.stored(v.ID)
	if c.Status != connection.NeedsReconnect || c.Reason != "Xero refused the connection's grant" || c.OrganisationID != "org-1" {
		t.Fatalf("%+v", c)
	}
	r := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	if back := h.check(h.m.Callback(ctx, h.allow(r.AuthorizeURL), adminBrowser)); back.Status != connection.Connected || back.Reason != "" {
		t.Fatalf("reconnected: %+v", back.Connection)
	}
}
