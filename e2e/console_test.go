package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/practicegw/practicegw/internal/eventually"
)

// chromiumPath is Debian's chromium, which `make test` installs.
const chromiumPath = "/usr/bin/chromium"

// screenshotDir keeps the console's screenshots as test artefacts.
const screenshotDir = "../artifacts/console"

// TestConsoleInBrowser drives the developer console in headless Chromium
// the way a firm administrator would: sign in, spot the failing endpoint
// and why, replay its failures, see which integration is near its ceiling,
// issue and revoke credentials, try requests against the sandbox, raise a
// sandbox event, sign out. Every view is saved as a screenshot.
func TestConsoleInBrowser(t *testing.T) {
	needChromium(t)
	g := startGateway(t, gatewayOptions{env: []string{
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE=20ms", "PRACTICEGW_WEBHOOK_BACKOFF_FACTOR=1", "PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN=10ms"}})

	// The firm: an administrator, integrations with traffic, one of them
	// close to a small ceiling, and webhook endpoints, one failing.
	admin := issueNamed(t, g, "Console admin", false, "", "admin")
	practice := issueNamed(t, g, "Practice sync", false, "60/h", allReadWrite...)
	reporting := issueNamed(t, g, "Reporting export", false, "", "jobs:read", "clients:read")
	old := issueNamed(t, g, "Old dashboard", false, "", "jobs:read")
	sandbox := issueNamed(t, g, "Sandbox tester", true, "", allReadWrite...)
	monitor := issueNamed(t, g, "Ops monitor", false, "", "webhooks:read")

	var mu sync.Mutex
	failing := true
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			http.Error(w, `{"error":"database is locked"}`, http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(bad.Close)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	t.Cleanup(good.Close)

	badID, _ := register(t, g, practice.Token, bad.URL+"/hooks/practice", "client.created")
	register(t, g, practice.Token, good.URL+"/hooks/crm", "*")
	register(t, g, sandbox.Token, good.URL+"/hooks/sandbox", "job.stage_changed")
	for _, name := range []string{"Hollis & Wray Ltd", "Marsh Partners LLP"} {
		if r := g.do(t, "POST", "/v1/clients", practice.Token, map[string]any{"name": name}); r.StatusCode != 201 {
			t.Fatalf("create client: %d %s", r.StatusCode, r.body)
		}
	}
	// Practice sync runs into its 60/h ceiling; the others make a little
	// traffic.
	for i := 0; i < 62; i++ {
		g.do(t, "GET", "/v1/jobs?limit=1", practice.Token, nil)
	}
	for i := 0; i < 8; i++ {
		g.do(t, "GET", "/v1/clients?limit=2", reporting.Token, nil)
	}
	if r := g.do(t, "GET", "/v1/jobs?limit=1", old.Token, nil); r.StatusCode != 200 {
		t.Fatalf("old credential: %d", r.StatusCode)
	}
	waitDeliveries(t, g, monitor.Token, badID, "failed", 2, 20*time.Second)

	b := newBrowser(t, "http://"+g.addr)

	// Signing in: the console sends a visitor without a session to the form.
	b.open("/console", "#token")
	if loc := b.location(); !strings.HasSuffix(loc, "/console/sign-in") {
		t.Fatalf("an unsigned visit to /console landed on %s", loc)
	}
	b.shot("01-sign-in")
	b.do(chromedp.SendKeys(chromedp.ID("token"), practice.Token), chromedp.Click(chromedp.ID("sign-in")))
	b.wait("#sign-in-problem")
	b.expect("#sign-in-problem", "lacks the admin scope")
	b.do(chromedp.SendKeys(chromedp.ID("token"), admin.Token), chromedp.Click(chromedp.ID("sign-in")))
	b.wait("nav.tabs")

	// Overview: the failing endpoint and why, the integration at its
	// ceiling.
	b.waitText("main", "Webhook endpoints that need attention")
	b.expect("main", bad.URL, "Failing", "500 Internal Server Error", "Practice sync")
	// The firm's records are demo records: there is no sync to show.
	if strings.Contains(b.html(), `id="sync"`) {
		t.Error("the overview of a firm on demo records shows a sync section")
	}
	b.shot("02-overview")

	b.open("/console/webhooks", "table.endpoints")
	b.expect("table.endpoints", bad.URL, good.URL, "Sandbox", "Failing", "Healthy")
	b.shot("03-webhooks")

	// The failing endpoint: open a delivery and read its attempts.
	b.do(chromedp.Click(chromedp.CSS(`a[href="/console/webhooks/` + badID + `"]`)))
	b.wait("#replay-failed-form")
	b.do(chromedp.Click(chromedp.CSS(".delivery:nth-of-type(2) summary")))
	b.waitText(".delivery:nth-of-type(2) .attempts", "attempt 6 of 6")
	b.expect(".delivery:nth-of-type(2)", "500 Internal Server Error", "database is locked")
	b.shot("04-endpoint-failing")

	// Fix the receiver; replay one delivery by hand.
	mu.Lock()
	failing = false
	mu.Unlock()
	b.do(chromedp.Click(chromedp.CSS(".delivery:nth-of-type(2) button[data-replay]")))
	b.waitText("#delivery-state", "delivered")
	b.expect("main", "Replay delivered: 204 No Content", "attempt 7 (replay)")
	b.shot("05-delivery-replayed")

	// Replay the rest of the endpoint's failures since a time.
	b.open("/console/webhooks/"+badID, "#replay-failed-form")
	since := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
	b.do(chromedp.SetValue(chromedp.ID("since"), since), chromedp.Click(chromedp.ID("replay-failed")))
	b.waitText(".flash.ok", "Queued 1 failed delivery")
	waitDeliveries(t, g, monitor.Token, badID, "delivered", 2, 10*time.Second)
	b.open("/console/webhooks/"+badID, "#replay-failed-form")
	b.expect(".page-head", "Healthy")
	b.expect(".stats", "2 delivered", "0 failed")
	b.shot("06-endpoint-recovered")

	// The log exports as a download, with the console's session.
	export, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`fetch("/console/webhooks/`+badID+`/export.csv")`+
		`.then(async r => r.headers.get("Content-Disposition") + "\n" + await r.text())`, chromedp.EvalAwaitPromise))
	disposition, rows, _ := strings.Cut(export, "\n")
	if err != nil || !strings.HasPrefix(disposition, "attachment;") || !strings.HasPrefix(rows, "delivery_id,") ||
		strings.Count(rows, ",replay,") != 2 || strings.Count(rows, "\n") != 15 {
		t.Fatalf("CSV export (%v):\n%s", err, export)
	}

	// Disable the endpoint and enable it again.
	b.do(chromedp.Click(chromedp.CSS(`form[action$="/status"] button`)))
	b.wait("#enable-endpoint")
	b.expect("main", "Endpoint disabled", "Disabled")
	b.do(chromedp.Click(chromedp.ID("enable-endpoint")))
	b.waitText(".flash.ok", "Endpoint enabled")

	// Another firm's credential, and a page that does not exist.
	out, err := g.cli("credential", "issue", "--json", "--firm", "frm_birch", "--name", "Birch integration", "--scopes", "jobs:read")
	var birch issued
	if err != nil || json.Unmarshal([]byte(out), &birch) != nil {
		t.Fatalf("issuing a frm_birch credential: %v: %s", err, out)
	}
	b.open("/console/access/"+birch.ID, ".error-page")
	b.expect(".error-page", "Not found")
	b.open("/console/nowhere", ".error-page")
	b.expect(".error-page", "Page not found", "/console/nowhere")

	// Traffic: the integration at its ceiling comes first, with its 429s.
	b.open("/console/traffic", "svg.chart")
	first, err := chromedp.Run(b.ctx, chromedp.AttributeValue(chromedp.CSS("section.traffic-row"), "data-credential"))
	if err != nil || first.Value != practice.ID {
		t.Fatalf("the first credential on the traffic page is %v (%v), want Practice sync %s", first, err, practice.ID)
	}
	b.expect("section.traffic-row", "Practice sync", "of 60 left", "429s, 7 days")
	// The console's own requests are its administrator's credential's
	// traffic, not an idle credential's last use.
	b.expect(`section.traffic-row[data-credential="`+admin.ID+`"]`, "Console admin", "requests, 7 days")
	if idle := b.text("main"); strings.Contains(idle, "No requests in 7 days") &&
		strings.Contains(idle[strings.Index(idle, "No requests in 7 days"):], "Console admin") {
		t.Errorf("the traffic page lists the console's own credential as idle:\n%s", idle)
	}
	b.shot("07-traffic")

	// Access: every credential and what it can reach; issue one.
	b.open("/console/access", "table.access")
	b.expect("table.access", "Practice sync", "Reporting export", "Old dashboard", "Sandbox tester", "Console admin")
	b.shot("08-access")
	b.do(chromedp.SendKeys(chromedp.ID("name"), "Partner dashboard"),
		chromedp.Click(chromedp.CSS(`input[name="scope"][value="jobs:read"]`)),
		chromedp.Click(chromedp.ID("issue-credential")))
	b.wait("#new-token")
	token, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.ID("token-value")))
	if err != nil || !strings.HasPrefix(token, "pgw_live_") {
		t.Fatalf("issued token %q (%v)", token, err)
	}
	if r := g.do(t, "GET", "/v1/jobs?limit=1", token, nil); r.StatusCode != 200 {
		t.Fatalf("the token the console issued: %d %s", r.StatusCode, r.body)
	}
	b.shot("09-credential-issued")
	b.do(chromedp.Reload())
	b.wait("#token-gone")
	if strings.Contains(b.html(), token) {
		t.Fatal("the token is shown again after a reload")
	}
	b.shot("10-credential-reloaded")

	// A post without the session's CSRF token is refused.
	status, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](
		`fetch("/console/access/`+reporting.ID+`/revoke", {method: "POST"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusForbidden {
		t.Fatalf("a revoke without a CSRF token answered %d (%v), want 403", status, err)
	}
	if r := g.do(t, "GET", "/v1/clients?limit=1", reporting.Token, nil); r.StatusCode != 200 {
		t.Fatalf("a forged revoke took effect: %d", r.StatusCode)
	}

	// Revoke a credential, through the confirm step.
	b.open("/console/access", "table.access")
	b.do(chromedp.Click(chromedp.CSS(`a[data-revoke="` + old.ID + `"]`)))
	b.wait("#confirm-revoke")
	b.expect("main", "Revoke Old dashboard?", "401")
	b.shot("11-revoke-confirm")
	b.do(chromedp.Click(chromedp.ID("confirm-revoke")))
	b.waitText(".flash.ok", "Revoked Old dashboard")
	b.expect(`tr[data-credential="`+old.ID+`"]`, "Revoked")
	b.shot("12-access-revoked")
	if r := g.do(t, "GET", "/v1/jobs?limit=1", old.Token, nil); r.StatusCode != 401 {
		t.Fatalf("a revoked credential still works: %d %s", r.StatusCode, r.body)
	}

	// Explorer: it offers only what its sandbox credential can send, and
	// says which routes that leaves out and why; then list jobs in the
	// sandbox and move one.
	b.open("/console/explorer?op=list_connections", "#explorer-form")
	if strings.Contains(b.html(), `name="op" value="list_connections"`) {
		t.Errorf("the explorer offers to send GET /v1/connections at %s", b.location())
	}
	nav := b.text("nav.ops")
	for _, never := range []string{"/connect/", "/v1/connections", "/v1/events/stream"} {
		if strings.Contains(nav, never) {
			t.Errorf("the explorer's routes offer %s:\n%s", never, nav)
		}
	}
	b.expect(".page-head", "sandbox credential", "not with yours", "every scope but admin")
	b.expect("#unsent", "GET /v1/connections", "DELETE /v1/connections/{id}", "admin scope", "GET /v1/events/stream", "practicegw listen")
	if strings.Contains(b.text("#unsent"), "/connect/") {
		t.Errorf("the explorer lists the consent's browser routes among the API's:\n%s", b.text("#unsent"))
	}
	b.open("/console/explorer?op=list_jobs", "#explorer-form")
	b.do(chromedp.SetValue(chromedp.ID("f-query-limit"), "2"), chromedp.Click(chromedp.ID("send")))
	b.waitText("#response-status", "200 OK")
	b.expect("#response", "GET /v1/jobs?limit=2", "Request-Id", "Ratelimit-Policy")
	body, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.ID("response-body")))
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Data []struct{ ID, Stage string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || len(page.Data) != 2 {
		t.Fatalf("explorer response body (%v): %s", err, body)
	}
	b.shot("13-explorer-list")
	b.do(chromedp.ScrollIntoView(chromedp.ID("unsent")))
	b.shot("13b-explorer-unsent")
	b.open("/console/explorer?op=move_job", "#explorer-form")
	b.do(chromedp.SetValue(chromedp.ID("f-path-id"), page.Data[0].ID),
		chromedp.SetValue(chromedp.ID("body"), `{"stage": "in_review", "note": "Ready for partner review"}`),
		chromedp.Click(chromedp.ID("send")))
	b.waitText("#response-status", "200 OK")
	b.expect("#response-body", `"stage": "in_review"`, page.Data[0].ID)
	b.shot("14-explorer-move")
	// The move happened in the sandbox, not in live records.
	if r := g.do(t, "GET", "/v1/jobs/"+page.Data[0].ID, sandbox.Token, nil); r.json(t)["stage"] != "in_review" {
		t.Fatalf("the sandbox job was not moved: %s", r.body)
	}

	// A sandbox event, then the page that finds its deliveries.
	b.do(chromedp.Click(chromedp.CSS(`button[data-kind="job.stage_changed"]`)))
	b.waitText(".flash.ok", "Raised job.stage_changed in the sandbox: event evt_")
	b.shot("15-explorer-triggered")
	b.do(chromedp.Click(chromedp.CSS(`.flash.ok a[href^="/console/events/evt_"]`)))
	b.wait("h1 code")
	b.waitText("main", "delivered")
	b.shot("16-event")

	// Sign out: the console is closed again.
	b.do(chromedp.Click(chromedp.ID("sign-out")))
	b.waitText(".flash.ok", "You have signed out")
	b.shot("17-signed-out")
	b.open("/console", "#token")
	if loc := b.location(); !strings.HasSuffix(loc, "/console/sign-in") {
		t.Fatalf("after signing out /console landed on %s", loc)
	}

	// No page ever carried the admin token, nor the explorer's sandbox token.
	for _, p := range b.pages {
		if strings.Contains(p.html, admin.Token) {
			t.Errorf("%s contains the admin token", p.url)
		}
		if m := regexp.MustCompile(`pgw_test_[A-Za-z0-9._-]+`).FindString(p.html); m != "" {
			t.Errorf("%s contains a sandbox token", p.url)
		}
	}
	if strings.Contains(g.logs.String(), admin.Token) {
		t.Error("the gateway's log contains the admin token")
	}
	// The explorer's credential went with the session.
	out, err = g.cli("credential", "list", "--firm", "frm_acme", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var creds []struct {
		Name      string  `json:"name"`
		RevokedAt *string `json:"revoked_at"`
	}
	if err := json.Unmarshal([]byte(out), &creds); err != nil {
		t.Fatalf("credential list: %v: %s", err, out)
	}
	explorers := 0
	for _, c := range creds {
		if c.Name == "Console explorer" {
			explorers++
		}
		if c.Name == "Console explorer" && c.RevokedAt == nil {
			t.Error("the explorer's sandbox credential outlived the session")
		}
	}
	if explorers != 1 {
		t.Errorf("the explorer issued %d sandbox credentials, want 1 for the session", explorers)
	}
}

// issueNamed issues a credential with a name and optional ceiling through
// the CLI.
func issueNamed(t *testing.T, g *gateway, name string, sandbox bool, rate string, scopes ...string) issued {
	t.Helper()
	args := []string{"credential", "issue", "--json", "--firm", "frm_acme", "--name", name, "--scopes", strings.Join(scopes, ",")}
	if sandbox {
		args = append(args, "--sandbox")
	}
	if rate != "" {
		args = append(args, "--rate-limit", rate)
	}
	out, err := g.cli(args...)
	if err != nil {
		t.Fatal(err)
	}
	var c issued
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("issue output %q: %v", out, err)
	}
	return c
}

// waitDeliveries waits until an endpoint has n deliveries in a state.
func waitDeliveries(t *testing.T, g *gateway, token, endpoint, state string, n int, within time.Duration) {
	t.Helper()
	eventually.NoError(t, within, 50*time.Millisecond, fmt.Sprintf("%d %s deliveries on %s", n, state, endpoint), func() error {
		r := g.do(t, "GET", "/v1/webhook_endpoints/"+endpoint+"/deliveries?state="+state, token, nil)
		got := 0
		if r.StatusCode == 200 {
			got = len(r.json(t)["data"].([]any))
		}
		if got < n {
			return fmt.Errorf("%d %s deliveries", got, state)
		}
		return nil
	})
}

// browser is one headless Chromium tab on the console.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots int
	pages []seenPage
}

type seenPage struct{ url, html string }

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// The whole walk-through has a minute; a hung page fails the test
	// rather than the suite.
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, base: base}
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v (at %s)", err, b.location())
	}
}

// open loads a console path and waits for an element of the page.
func (b *browser) open(path, ready string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
	b.wait(ready)
}

// wait waits for an element to be visible, and records the page.
func (b *browser) wait(sel string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(sel)))
	b.html()
}

// waitText waits until an element's text contains want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	// A failed wait ends this goroutine through t.Fatalf, which runs the
	// deferred call: the page is shot as it was when the wait gave up.
	seen := false
	defer func() {
		if !seen {
			b.shot("failed-" + strings.NewReplacer(" ", "_", "#", "", ".", "", "/", "").Replace(want))
		}
	}()
	eventually.NoError(b.t, 10*time.Second, 50*time.Millisecond, fmt.Sprintf("%s to say %q", sel, want), func() error {
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(
			`(function(){var e=document.querySelector(%q);return e?e.textContent:""})()`, sel)))
		if err == nil && strings.Contains(got, want) {
			return nil
		}
		return fmt.Errorf("it says %q (err %v, at %s)", got, err, b.location())
	})
	seen = true
	b.html()
}

// expect checks that an element's text contains every one of want.
func (b *browser) expect(sel string, want ...string) {
	b.t.Helper()
	got, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			b.t.Errorf("%s at %s does not say %q; it says:\n%s", sel, b.location(), w, tail(got, 1500))
		}
	}
}

func (b *browser) location() string {
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	return loc
}

// html returns the page's HTML and remembers it for the token check.
func (b *browser) html() string {
	b.t.Helper()
	h, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		b.t.Fatalf("reading the page: %v", err)
	}
	b.pages = append(b.pages, seenPage{url: b.location(), html: h})
	return h
}

// shot saves a full-page screenshot under artifacts/console.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.shots++
}
