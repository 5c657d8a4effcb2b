package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// TestConnectionsInTheConsole is issue 26's walk in headless Chromium, on
// a gateway whose firm block has nothing but a name: an administrator
// connects Xero through its consent page and Karbon by access key from
// the Systems page, and /v1 serves their records; a refresh token the
// firm revokes at Xero turns the connection to needs_reconnect within a
// poll, with a banner on every page, Xero's webhooks meanwhile answered
// 200, and Reconnect resumes it without a new backfill, the invoice paid
// meanwhile served paid; Disconnect revokes at Xero, removes Karbon's webhook
// subscriptions and purges. No secret of either vendor, nor the consent's
// code or state, shows in a page, the log, the metrics or an error body.
func TestConnectionsInTheConsole(t *testing.T) {
	needChromium(t)
	const contacts = 10
	v := startVendors(t, vendorOptions{contacts: contacts, workItems: 10})
	k, x := v.k, v.x
	// Every access token is due for a refresh at once (the gateway
	// refreshes a minute early): a revoked grant shows at the next call.
	x.Identity.SetAccessTTL(30 * time.Second)
	const firmKey = "firm-karbon-access-key-7f3a9c"
	k.AddAccessKey(firmKey)

	addr := freePort(t)
	public := "http://" + addr
	x.Identity.AllowRedirect(public + "/connect/callback")
	g := startGateway(t, gatewayOptions{addr: addr, config: connectCaddyfile(t, public, k, x),
		env: []string{"PRACTICEGW_SYNC_POLL=1s", "TEST_XERO_SECRET=" + x.Identity.ClientSecret, "TEST_KARBON_BEARER=" + k.Bearer}})
	adminCred := g.issue("frm_hollis", false, "admin")
	admin := adminCred.Token
	reader := g.issue("frm_hollis", false, "invoices:read", "clients:read").Token
	var bodies []string // every error body the gateway answered

	b := newBrowser(t, public)
	b.open("/console", "#token")
	b.do(chromedp.SendKeys(chromedp.ID("token"), admin), chromedp.Click(chromedp.ID("sign-in")))
	b.wait("nav.tabs")
	b.open("/console/systems", "#connect-ledger")
	b.shot("connections-01-systems")

	// 1. Xero, through its consent page.
	b.do(chromedp.SetValue(chromedp.ID("connect-ledger-system"), "xero"),
		chromedp.Click(chromedp.CSS("#connect-ledger button[type=submit]")))
	b.wait("#allow")
	b.shot("connections-02-xero-consent")
	b.do(chromedp.Click(chromedp.ID("allow")))
	b.waitText("#callback-result", "Xero is connected for Hollis & Vane LLP")
	callback := b.location()
	b.shot("connections-03-callback")
	b.do(chromedp.Click(chromedp.ID("systems-link")))
	b.wait(`#role-ledger [data-status="connected"]`)
	// The sync shows once an instance has opened it (within a follow of
	// the store): backfilling with its progress, then live, in the one
	// badge of the connection.
	var states []string
	eventually.NoError(t, 20*time.Second, 100*time.Millisecond, "the ledger's sync to be live on Systems", func() error {
		b.do(chromedp.Navigate(public + "/console/systems"))
		state := b.attributeOr("#role-ledger [data-sync-state]", "data-sync-state")
		if state != "" && (len(states) == 0 || states[len(states)-1] != state) {
			states = append(states, state)
			b.shot("connections-04-xero-" + state)
		}
		if state != "live" {
			return fmt.Errorf("sync %q", state)
		}
		return nil
	})
	for _, s := range states {
		if s != "backfilling" && s != "live" {
			t.Errorf("the ledger's sync went %v, want backfilling then live", states)
		}
	}
	b.html()
	b.shot("connections-05-xero-live")

	invoices := pageAll(t, g, reader, "/v1/invoices", 10)
	var want, got []string
	for i := range min(30, contacts) {
		want = append(want, fmt.Sprintf("inv_00000000-0000-0000-0000-%012d", i))
	}
	for _, inv := range invoices {
		got = append(got, inv["id"].(string))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("/v1/invoices serves %v, want the organisation's %v", got, want)
	}

	// 2. Karbon, by access key.
	b.open("/console/systems", "#connect-records")
	b.do(chromedp.SetValue(chromedp.ID("connect-records-system"), "karbon"),
		chromedp.SendKeys(chromedp.ID("connect-records-access-key"), firmKey),
		chromedp.Click(chromedp.CSS("#connect-records button[type=submit]")))
	b.wait(`#role-records [data-status="connected"]`)
	karbonID := b.attribute("#role-records [data-connection]", "data-connection")
	b.shot("connections-06-karbon-connected")
	var types, signingKeys []string
	for _, s := range k.Subscriptions() {
		if s.AccessKey != firmKey {
			continue
		}
		types = append(types, s.WebhookType)
		signingKeys = append(signingKeys, s.SigningKey)
		if s.TargetUrl != public+"/connect/webhooks/karbon/"+karbonID {
			t.Errorf("Karbon's %s subscription posts to %s, want %s", s.WebhookType, s.TargetUrl, public+"/connect/webhooks/karbon/"+karbonID)
		}
	}
	if slices.Sort(types); !slices.Equal(types, []string{"Contact", "User", "Work"}) {
		t.Fatalf("Karbon holds subscriptions %v for the firm's key, want Contact, User, Work", types)
	}
	eventually.NoError(t, 20*time.Second, 50*time.Millisecond, "/v1/clients to serve Karbon's contacts", func() error {
		// Until the gateway follows the new connection (every 500 ms) the
		// role answers system_not_connected.
		if r := g.do(t, "GET", "/v1/clients?limit=1", reader, nil); r.StatusCode != 200 {
			return fmt.Errorf("%d %s", r.StatusCode, tail(string(r.body), 200))
		}
		if n := len(pageAll(t, g, reader, "/v1/clients", 50)); n != contacts {
			return fmt.Errorf("%d clients", n)
		}
		return nil
	})
	// A contact renamed in Karbon, which posts its signed webhook: the
	// gateway reads that contact back and serves the new name.
	k.AddContact(vendortest.KarbonContact{ContactKey: "C005", FirstName: "Ann", LastName: "Renamed-Client005", ContactType: "Client",
		Email: "ann5@example.com", Country: "GB", OwnerKey: "U1", LastModified: time.Now(), ExternalKey: "xc-5"})
	reads := func() (n int) {
		for _, r := range k.Requests() {
			if strings.HasPrefix(r, "GET /v3/Contacts/C005") {
				n++
			}
		}
		return n
	}
	before := reads()
	statuses, err := k.Deliver("Contact", vendortest.KarbonWebhook("Contact", "C005", "Updated", time.Now()), firmKey)
	if err != nil || len(statuses) != 1 || statuses[0] != http.StatusOK {
		t.Fatalf("Karbon's delivery to the gateway: %v %v", statuses, err)
	}
	eventually.True(t, 10*time.Second, poll, "the renamed contact in /v1/clients", func() bool {
		return strings.Contains(string(g.do(t, "GET", "/v1/clients?limit=50", reader, nil).body), "Renamed-Client005")
	})
	if reads() == before {
		t.Error("the gateway did not read the contact Karbon's webhook named")
	}

	// Karbon goes down: the records' one badge says failing, in a
	// sentence for the administrator, never "connected" beside it nor
	// the error chain (the log has it); back up, it is live again.
	k.Faults.Down(vendortest.Fault{Status: http.StatusServiceUnavailable, Body: `{"error":"down for maintenance"}`})
	b.openUntil("/console/systems", "#role-records [data-status]", "failing")
	panel := b.text("#role-records")
	if badge := b.text("#role-records .badge"); badge != "failing" || !strings.Contains(b.text("#role-records [data-standing]"), "Karbon") {
		t.Errorf("the records panel while Karbon is down has the badge %q and says:\n%s", badge, panel)
	}
	for _, chain := range []string{"karbon:", "503", "circuit breaker", "poll ", "Details", "http://"} {
		if strings.Contains(panel, chain) {
			t.Errorf("the records panel while Karbon is down shows %q:\n%s", chain, panel)
		}
	}
	if n := strings.Count(b.html(), `id="role-records"`); n != 1 {
		t.Errorf("%d records panels", n)
	}
	b.shot("connections-06b-karbon-failing")
	k.Faults.Up()
	eventually.NoError(t, 90*time.Second, 500*time.Millisecond, "the records to be live again once Karbon is back", func() error {
		b.do(chromedp.Navigate(public + "/console/systems"))
		if got := b.text("#role-records [data-status]"); got != "live" {
			return fmt.Errorf("the records' badge says %q", got)
		}
		return nil
	})

	// 3. The firm revokes the app at Xero. The next call to Xero refreshes
	// the token and is refused. A connection's polls are spaced to fit
	// Xero's published daily limit (tens of seconds apart), so the call is
	// the one a change in Xero brings: its webhook, at the one route.
	x.Identity.RevokeAll()
	revoked := time.Now()
	paid := "00000000-0000-0000-0000-000000000003"
	x.Pay(paid, "Bank transfer", time.Now())
	xbody := vendortest.XeroWebhook(x.TenantID, time.Now(), paid)
	// Answered 200 once kept, as every verified delivery is: Xero retries
	// a non-2xx answer for 24 hours and then disables the app's one
	// webhook, every firm's, so one firm's refused grant must not fail it.
	// Its invoice is not lost: the notification inbox keeps it (for an
	// hour) and the sync reads it, or polls it, once the firm reconnects.
	if code := postSigned(t, g, "/connect/webhooks/xero", xbody, "x-xero-signature", vendortest.SignXero(xeroWebhookKey, xbody)); code != 200 {
		t.Fatalf("Xero's webhook, with the grant revoked, answered %d, want 200", code)
	}
	eventually.NoError(t, 10*time.Second, 50*time.Millisecond, "readiness to say needs_reconnect", func() error {
		if s := connectionStates(t, g)["xero"]; s != "needs_reconnect" {
			return fmt.Errorf("xero connection %q", s)
		}
		return nil
	})
	if took := time.Since(revoked); took > 3*time.Second {
		t.Errorf("needs_reconnect showed %s after the revocation and Xero's webhook", took)
	}
	if ready := string(g.do(t, "GET", "/readyz", "", nil).body); strings.Contains(ready, "invalid_grant") || strings.Contains(ready, "Xero said") {
		t.Errorf("/readyz carries the vendor's text: %s", ready)
	}
	b.open("/console/systems", "#role-ledger [data-status]")
	b.expect("#role-ledger [data-status]", "needs reconnecting")
	if reason := b.text("#role-ledger [data-standing]"); !strings.Contains(reason, "Xero no longer accepts this connection's grant; reconnect it.") {
		t.Errorf("the Systems page says %q of a connection that needs reconnecting", reason)
	}
	b.shot("connections-07-needs-reconnect")
	// Xero sends the change again (another body of the same event): the
	// connection waits for its administrator, and it is answered 200 too.
	again := vendortest.XeroWebhook(x.TenantID, time.Now(), paid)
	if code := postSigned(t, g, "/connect/webhooks/xero", again, "x-xero-signature", vendortest.SignXero(xeroWebhookKey, again)); code != 200 {
		t.Fatalf("Xero's webhook for a connection needing reconnect answered %d, want 200", code)
	}
	for _, page := range []string{"/console", "/console/webhooks", "/console/access", "/console/traffic"} {
		b.open(page, "main")
		b.expect("[data-needs-reconnect]", "Xero needs to be reconnected")
	}
	b.shot("connections-08-banner")
	r := g.do(t, "GET", "/v1/invoices?limit=50", reader, nil)
	if r.StatusCode != 200 || r.Header.Get("Data-State") != "failing" || len(r.json(t)["data"].([]any)) != len(want) {
		t.Fatalf("/v1/invoices while Xero needs reconnecting: %d Data-State %q %s", r.StatusCode, r.Header.Get("Data-State"), r.body)
	}

	// Reconnect: consent again; the sync resumes from its copy.
	b.open("/console/systems", "#reconnect-ledger")
	b.do(chromedp.Click(chromedp.CSS("#reconnect-ledger button[type=submit]")))
	b.wait("#allow")
	b.do(chromedp.Click(chromedp.ID("allow")))
	b.waitText("#callback-result", "Xero is connected")
	b.do(chromedp.Click(chromedp.ID("systems-link")))
	b.wait(`#role-ledger [data-status="connected"]`)
	eventually.NoError(t, 10*time.Second, 20*time.Millisecond, "the ledger's sync to be live again", func() error {
		s := syncStates(t, g)["xero"]
		if strings.HasPrefix(s, "backfilling") {
			t.Fatalf("the ledger's sync backfills again after Reconnect: %q", s)
		}
		if !strings.HasPrefix(s, "live") || connectionStates(t, g)["xero"] != "connected" {
			return fmt.Errorf("xero sync %q, connection %q", s, connectionStates(t, g)["xero"])
		}
		return nil
	})
	b.openUntil("/console/systems", "#role-ledger [data-sync-state]", "live")
	b.shot("connections-09-reconnected")
	// The invoice paid while the grant was refused, whose notification was
	// acknowledged, is served paid once the firm reconnects.
	eventually.NoError(t, 15*time.Second, 100*time.Millisecond, "the invoice paid while Xero was refused to be served paid", func() error {
		r := g.do(t, "GET", "/v1/invoices/inv_"+paid, reader, nil)
		if r.StatusCode != 200 {
			return fmt.Errorf("%d %s", r.StatusCode, tail(string(r.body), 200))
		}
		if s := r.json(t)["status"]; s != "paid" {
			return fmt.Errorf("status %v", s)
		}
		return nil
	})
	if grants := x.Identity.Grants(); len(grants) != 2 || grants[1].Revoked {
		t.Fatalf("Xero's grants after Reconnect: %+v", grants)
	}

	// 4. Disconnect both, through the confirm step.
	for _, role := range []string{"ledger", "records"} {
		b.open("/console/systems", "#disconnect-"+role)
		b.do(chromedp.Click(chromedp.ID("disconnect-" + role)))
		b.wait("#confirm-disconnect")
		b.shot("connections-10-disconnect-" + role)
		b.do(chromedp.Click(chromedp.ID("confirm-disconnect")))
		b.wait("#connect-" + role)
	}
	b.shot("connections-11-disconnected")
	disconnected := 0
	for _, c := range g.do(t, "GET", "/v1/connections", admin, nil).json(t)["data"].([]any) {
		if c := c.(map[string]any); c["status"] == "disconnected" {
			disconnected++
			if c["reason"] != "disconnected by "+adminCred.Name+" (credential "+adminCred.ID+") in the console" {
				t.Errorf("%s says %q, want it to name the administrator who disconnected it", c["id"], c["reason"])
			}
		}
	}
	if disconnected < 2 {
		t.Errorf("%d connections say disconnected, want the ledger's and the records'", disconnected)
	}
	for _, gr := range x.Identity.Grants() {
		if !gr.Revoked {
			t.Errorf("Xero's grant %s is not revoked after Disconnect", gr.ID)
		}
	}
	for _, s := range k.Subscriptions() {
		if s.AccessKey == firmKey {
			t.Errorf("Karbon still holds the %s subscription after Disconnect", s.WebhookType)
		}
	}
	for _, path := range []string{"/v1/invoices", "/v1/clients"} {
		eventually.NoError(t, 10*time.Second, poll, path+" to answer 409 system_not_connected", func() error {
			r := g.do(t, "GET", path, reader, nil)
			if r.StatusCode != http.StatusConflict || r.errorCode(t) != "system_not_connected" {
				return fmt.Errorf("%d %s", r.StatusCode, r.body)
			}
			bodies = append(bodies, string(r.body))
			return nil
		})
	}
	// The consent's state, spent, is refused, in the contract's body.
	replay := g.do(t, "GET", strings.TrimPrefix(callback, public), "", nil)
	if replay.StatusCode < 400 || replay.StatusCode >= 500 {
		t.Errorf("a replayed callback answered %d %s", replay.StatusCode, replay.body)
	}
	bodies = append(bodies, string(replay.body))

	// 5. No secret anywhere the firm or the operator can look.
	code, state := callbackParams(t, callback)
	secrets := map[string]string{"the consent's code": code, "the consent's state": state, "Karbon's access key": firmKey,
		"Karbon's bearer": k.Bearer, "Xero's client secret": x.Identity.ClientSecret}
	for i, gr := range x.Identity.Grants() {
		secrets[fmt.Sprintf("grant %d's refresh token", i)] = gr.RefreshToken
	}
	for i, key := range signingKeys {
		secrets[fmt.Sprintf("Karbon signing key %d", i)] = key
	}
	exposition := metrics(t, g)
	if !strings.Contains(exposition, "practicegw_connections") {
		t.Errorf("admin /metrics has no practicegw_connections")
	}
	places := map[string]string{"the gateway's log": g.logs.String(), "/metrics": exposition, "the error bodies": strings.Join(bodies, "\n")}
	// The gateway's pages; the vendor's consent page carries the state in
	// its URL by design, as the consent step's link to it must.
	for _, p := range b.pages {
		if strings.HasPrefix(p.url, public+"/") {
			places["the page "+p.url] = p.html
		}
	}
	// The double's codes and tokens: code-N-hex, at-N-hex, rt-N-hex.
	minted := regexp.MustCompile(`\b(code|at|rt)-[0-9]+-[0-9a-f]{32}\b`)
	for where, text := range places {
		for what, secret := range secrets {
			if secret != "" && strings.Contains(text, secret) {
				t.Errorf("%s shows %s", where, what)
			}
		}
		if m := minted.FindString(text); m != "" {
			t.Errorf("%s shows a token or code of Xero's (%.8s…)", where, m)
		}
	}
	masked := regexp.MustCompile(`"uri":"/connect/callback\?code=REDACTED(&|\\u0026)state=REDACTED"`)
	if n := len(masked.FindAllString(g.logs.String(), -1)); n < 2 {
		t.Errorf("the gateway's access log has %d lines for the consents' callbacks, want them with their query masked", n)
	}
	if n := strings.Count(g.logs.String(), `"uri":"/connect/start/REDACTED"`); n < 2 {
		t.Errorf("the gateway's access log has %d lines for the consents' start links, want them with their token masked", n)
	}
	if start := regexp.MustCompile(`/connect/start/[A-Za-z0-9_-]{43}`).FindString(g.logs.String()); start != "" {
		t.Errorf("the gateway's log shows a consent's start link")
	}
}

// connectCaddyfile is a gateway offering connections to the Xero and
// Karbon doubles, whose firm frm_hollis has nothing but a name, with the
// root Caddyfile's access log.
func connectCaddyfile(t *testing.T, public string, k *vendortest.Karbon, x *vendortest.Xero) string {
	t.Helper()
	config := fmt.Sprintf(`{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		connect {
			public_url %s
			xero {
				client_id %s
				client_secret {env.TEST_XERO_SECRET}
				authorize_url %s
				token_url %s
				revoke_url %s
				connections_url %s
				base_url %s
				webhook_key %s
			}
			karbon {
				bearer {env.TEST_KARBON_BEARER}
				base_url %s
			}
		}
		firm frm_hollis {
			name "Hollis & Vane LLP"
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
%s
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	@vendor_webhooks path /ingest/* /connect/webhooks/*
	handle @vendor_webhooks {
		practicegw_ingest
	}
	handle /v1/openapi.json {
		practicegw_api
	}
	handle /v1/* {
		practicegw_auth
		practicegw_ratelimit
		practicegw_api
	}
	handle /console* {
		practicegw_console
	}
	handle {
		practicegw_api
	}
}
`, public, x.Identity.ClientID, x.Identity.AuthorizeURL(), x.Identity.TokenURL(), x.Identity.RevokeURL(), x.ConnectionsURL(), x.Identity.URL,
		xeroWebhookKey, k.URL, rootAccessLog(t))
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rootAccessLog is the root Caddyfile's site `log` block, so that what
// this test checks of the log is what the embedded default writes.
func rootAccessLog(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	start := strings.Index(s, "\n\tlog {\n")
	end := strings.Index(s[max(start, 0):], "\n\t}\n")
	if start < 0 || end < 0 {
		t.Fatal("the root Caddyfile's site has no log block")
	}
	return s[start+1 : start+end+3]
}

// callbackParams are the code and state of the consent's callback URL.
func callbackParams(t *testing.T, callback string) (code, state string) {
	t.Helper()
	_, query, _ := strings.Cut(callback, "?")
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "code":
			code = v
		case "state":
			state = v
		}
	}
	if code == "" || state == "" {
		t.Fatalf("the callback %q has no code or state", callback)
	}
	return code, state
}

// connectionStates reads /readyz: each connection's status by system.
func connectionStates(t testing.TB, g *gateway) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range readyChecks(t, g) {
		if name, ok := strings.CutPrefix(c.Name, "connection "); ok {
			system, _, _ := strings.Cut(name, "/")
			out[system] = c.Detail
		}
	}
	return out
}

type readyCheck struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// readyChecks are /readyz's checks.
func readyChecks(t testing.TB, g *gateway) []readyCheck {
	t.Helper()
	var ready struct {
		Checks []readyCheck `json:"checks"`
	}
	r := g.do(t, "GET", "/readyz", "", nil)
	if err := json.Unmarshal(r.body, &ready); err != nil {
		t.Fatalf("/readyz: %v: %s", err, r.body)
	}
	return ready.Checks
}

// openUntil loads a console page again until an element's text contains
// want, as a firm administrator refreshing it would.
func (b *browser) openUntil(path, sel, want string) {
	b.t.Helper()
	eventually.NoError(b.t, 20*time.Second, 200*time.Millisecond, fmt.Sprintf("%s at %s to say %q", sel, path, want), func() error {
		b.do(chromedp.Navigate(b.base + path))
		if got := b.text(sel); !strings.Contains(got, want) {
			return fmt.Errorf("it says %q", got)
		}
		return nil
	})
	b.html()
}

// attributeOr is an attribute of the first element sel finds, "" when
// there is none.
func (b *browser) attributeOr(sel, name string) string {
	b.t.Helper()
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`(function(){var e=document.querySelector(%q);return e?(e.getAttribute(%q)||""):""})()`, sel, name)))
	if err != nil {
		b.t.Fatalf("reading %s's %s: %v", sel, name, err)
	}
	return got
}

// text is an element's text, "" when there is none.
func (b *browser) text(sel string) string {
	b.t.Helper()
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`(function(){var e=document.querySelector(%q);return e?e.textContent:""})()`, sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return got
}

// attribute is an attribute of the first element sel finds.
func (b *browser) attribute(sel, name string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil || v.Value == "" {
		b.t.Fatalf("%s's %s: %q %v", sel, name, v.Value, err)
	}
	return v.Value
}
