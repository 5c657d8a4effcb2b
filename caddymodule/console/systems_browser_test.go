package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// TestSystemsInBrowser walks the Systems page in headless Chromium, with
// the pages' own Content-Security-Policy: Connect leads the browser to
// the vendor's consent page on another origin, the vendor's Allow brings
// it back connected, the banner of a connection that needs reconnecting
// leads to Reconnect, and Disconnect asks first.
func TestSystemsInBrowser(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: run `make test`, which installs it", chromium)
		}
		t.Skipf("%s is missing (run `make test`, which installs it)", chromium)
	}
	rg := newConsoleRig(t, "frm_acme", nil)
	conns := &pageConnections{}
	rg.h.connList, rg.h.connChange = conns, conns

	mux := http.NewServeMux()
	mux.Handle("/console/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rg.h.ServeHTTP(w, r, nil) }))
	// Signs the browser in as the rig's administrator.
	mux.HandleFunc("/signed-in", func(w http.ResponseWriter, r *http.Request) {
		ck := *rg.cookie
		ck.Path = "/"
		http.SetCookie(w, &ck)
		http.Redirect(w, r, "/console/systems", http.StatusSeeOther)
	})
	console := httptest.NewServer(mux)
	t.Cleanup(console.Close)

	// The vendor: a consent page with an Allow button, on its own origin,
	// whose answer the callback turns into a connected connection.
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/authorize":
			fmt.Fprintf(w, `<!doctype html><title>Consent</title><form action="/allow"><input type="hidden" name="state" value="%s">`+
				`<button id="allow">Allow</button></form>`, r.URL.Query().Get("state"))
		case "/allow":
			conns.mu.Lock()
			for i := range conns.conns {
				if conns.conns[i].Status == connection.Pending {
					conns.conns[i].Status, conns.conns[i].OrganisationName, conns.conns[i].Reason = connection.Connected, "Demo Company (UK)", ""
				}
			}
			conns.mu.Unlock()
			http.Redirect(w, r, console.URL+"/console/systems", http.StatusFound)
		}
	}))
	t.Cleanup(vendor.Close)
	conns.vendor = vendor.URL

	ctx := browserContext(t, chromium)
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	text := func(sel, want string) {
		t.Helper()
		eventually.NoError(t, 15*time.Second, 50*time.Millisecond, fmt.Sprintf("%s to say %q", sel, want), func() error {
			got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
				`(function(){var e=document.querySelector(%q);return e?e.textContent:""})()`, sel)))
			if err == nil && strings.Contains(got, want) {
				return nil
			}
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			return fmt.Errorf("it says %q (err %v, at %s)", got, err, loc)
		})
	}

	do(chromedp.Navigate(console.URL+"/signed-in"), chromedp.WaitVisible(chromedp.CSS("#connect-ledger")))
	// Karbon's billing is a ledger too: the firm picks Xero.
	do(chromedp.SetValue(chromedp.ID("connect-ledger-system"), "xero"))
	do(chromedp.Click(chromedp.CSS("#connect-ledger button")), chromedp.WaitVisible(chromedp.ID("allow")))
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasPrefix(loc, vendor.URL+"/authorize?state=") {
		t.Fatalf("Connect led to %s, not the vendor's consent page", loc)
	}
	do(chromedp.Click(chromedp.ID("allow")))
	text("#role-ledger", "connected")
	text("#role-ledger", "Demo Company (UK)")

	// The vendor refuses the grant: every page says so, and Reconnect
	// goes through the consent again.
	conns.mu.Lock()
	conns.conns[0].Status, conns.conns[0].Reason = connection.NeedsReconnect, "Xero refused the grant (revoked)"
	conns.mu.Unlock()
	do(chromedp.Navigate(console.URL + "/console/webhooks"))
	text(".banner", "Xero needs to be reconnected: it no longer accepts the gateway's access (why is on Systems).")
	do(chromedp.Click(chromedp.CSS(".banner a")), chromedp.WaitVisible(chromedp.CSS("#reconnect-ledger button")))
	do(chromedp.Click(chromedp.CSS("#reconnect-ledger button")), chromedp.WaitVisible(chromedp.ID("allow")))
	do(chromedp.Click(chromedp.ID("allow")))
	text("#role-ledger", "connected")
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".banner").length`)); n != 0 {
		t.Errorf("the banner stays after reconnecting (%d)", n)
	}

	do(chromedp.Click(chromedp.ID("disconnect-ledger")), chromedp.WaitVisible(chromedp.ID("confirm-disconnect")))
	do(chromedp.Click(chromedp.ID("confirm-disconnect")), chromedp.WaitVisible(chromedp.CSS("#connect-ledger")))
	text(".flash.ok", "Xero is disconnected")
	want := []string{"connect ledger xero key=", "reconnect key= con_new1", "disconnect con_new1"}
	if got := conns.asked(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the page asked %q, want %q", got, want)
	}
}

func browserContext(t *testing.T, chromium string) context.Context {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.NoFirstRun, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()))
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// TestSystemsStatesInBrowser shows the Systems page in headless Chromium
// in each state an administrator meets, each saved as a screenshot under
// artifacts/console: every connection connected and live; the records'
// vendor failing; the ledger needing reconnecting while the records lag;
// the document store waiting for consent, then for its site to be chosen.
// Each panel says one badge and one sentence, true of the connection and
// its data alike.
func TestSystemsStatesInBrowser(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: run `make test`, which installs it", chromium)
		}
		t.Skipf("%s is missing (run `make test`, which installs it)", chromium)
	}
	rg, conns := systemsStates(t)
	mux := http.NewServeMux()
	mux.Handle("/console/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rg.h.ServeHTTP(w, r, nil) }))
	mux.HandleFunc("/signed-in", func(w http.ResponseWriter, r *http.Request) {
		ck := *rg.cookie
		ck.Path = "/"
		http.SetCookie(w, &ck)
		http.Redirect(w, r, "/console/systems", http.StatusSeeOther)
	})
	console := httptest.NewServer(mux)
	t.Cleanup(console.Close)
	const dir = "../../artifacts/console"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := browserContext(t, chromium)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
	say := func(role, word, sentence string) {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(
			`(function(){var p=document.querySelector("#role-%s");return p?[p.querySelector(".badge").textContent,p.querySelector("[data-standing]").textContent]:[]})()`, role)))
		if err != nil || len(got) != 2 || strings.TrimSpace(got[0]) != word || !strings.Contains(got[1], sentence) {
			t.Errorf("the %s panel says %q (%v), want %q and %q", role, got, err, word, sentence)
		}
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(dir+"/"+name+".png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open := func() {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(console.URL+"/console/systems"), chromedp.WaitVisible(chromedp.CSS("#role-documents"))); err != nil {
			t.Fatal(err)
		}
	}
	statuses := rg.syncs.statuses["frm_acme"]
	if err := chromedp.Do(ctx, chromedp.Navigate(console.URL+"/signed-in"), chromedp.WaitVisible(chromedp.CSS("#role-documents"))); err != nil {
		t.Fatal(err)
	}

	// 1. Connected and live: the ledger and the records, documents
	// connected too.
	conns.mu.Lock()
	conns.conns[2].Status, conns.conns[2].OrganisationID, conns.conns[2].OrganisationName = connection.Connected, "site-1", "Clients"
	conns.conns[2].Sync = []connection.SyncStatus{{Role: "documents", State: "live"}}
	conns.conns[1].Sync[0].State = "live"
	conns.mu.Unlock()
	statuses[1].State, statuses[1].Kinds[0].State = readmodel.StateLive, readmodel.StateLive
	docs := readmodel.Status{Firm: "frm_acme", Role: "documents", System: "sharepoint", Label: "SharePoint", State: readmodel.StateLive,
		ConfirmedAt: rigNow.Add(-20 * time.Second)}
	rg.syncs.statuses["frm_acme"] = append(statuses, docs)
	open()
	say("ledger", "live", "Connected and up to date: confirmed with Xero 2 min ago.")
	say("records", "live", "Connected and up to date: confirmed with Karbon 2 min ago.")
	say("documents", "live", "Connected and up to date: confirmed with SharePoint just now.")
	shot("systems-01-connected-live")

	// 2. Karbon fails: its badge says so, in a sentence, never beside
	// "connected".
	conns.mu.Lock()
	conns.conns[1].Sync[0].State = "failing"
	conns.mu.Unlock()
	st := rg.syncs.statuses["frm_acme"]
	st[1].State, st[1].Kinds[0].State = readmodel.StateFailing, readmodel.StateFailing
	open()
	say("records", "failing", "Karbon failed several times in a row; the gateway pauses its calls, then tries again. It affects the clients")
	shot("systems-02-vendor-failing")

	// 3. Xero refuses the grant; Karbon, back, lags.
	conns.mu.Lock()
	conns.conns[0].Status, conns.conns[0].Reason = connection.NeedsReconnect, "Xero no longer accepts this connection's grant; reconnect it."
	conns.conns[1].Sync[0].State = "lagging"
	conns.mu.Unlock()
	st[0].State, st[0].Why = readmodel.StateFailing, "Xero no longer accepts this connection's grant; reconnect it."
	st[1].State, st[1].Why = readmodel.StateLagging, "jobs not confirmed since 2026-03-02T09:58:00Z"
	st[1].Kinds[0].State, st[1].Kinds[1].State = readmodel.StateLive, readmodel.StateLagging
	open()
	say("ledger", "needs reconnecting", "Xero no longer accepts this connection's grant; reconnect it. Until then its copy, last confirmed with Xero 2 min ago, is served as it was.")
	say("records", "lagging", "Karbon has not confirmed the jobs since 09:58 UTC on 2 March 2026")
	shot("systems-03-needs-reconnecting")

	// 4. SharePoint connected anew: waiting for consent, then for its
	// site to be chosen.
	conns.mu.Lock()
	conns.conns[2].Status, conns.conns[2].OrganisationID, conns.conns[2].OrganisationName, conns.conns[2].Sync = connection.Pending, "", "", nil
	conns.mu.Unlock()
	rg.syncs.statuses["frm_acme"] = st[:2]
	open()
	say("documents", "waiting for consent", "Waiting for the administrator to allow access at SharePoint.")
	shot("systems-04-pending")
	conns.mu.Lock()
	conns.conns[2].Status = connection.ChooseOrganisation
	conns.conns[2].Choices = []connection.Organisation{{ID: "site-1", Name: "Clients"}, {ID: "site-2", Name: "Marketing"}}
	conns.mu.Unlock()
	open()
	say("documents", "choose the site", "SharePoint gave access to several sites: choose the one the gateway reads.")
	shot("systems-05-choose-site")
}
