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
