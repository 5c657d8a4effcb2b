package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/practicegw/practicegw/internal/eventually"
)

// The README's "Try connections locally", as a newcomer does it:
// practicegw-vendors and config/try-connections.Caddyfile started as it
// says, Xero connected through the double's consent page and Karbon with
// the double's access key from the console's Systems page in headless
// Chromium, and /v1 serving their clients and invoices.
func TestTryConnectionsLocally(t *testing.T) {
	needChromium(t)
	vendorsBin := filepath.Join(t.TempDir(), "practicegw-vendors")
	if out, err := exec.Command("go", "build", "-o", vendorsBin, "../cmd/practicegw-vendors").CombinedOutput(); err != nil {
		t.Fatalf("building practicegw-vendors: %v\n%s", err, out)
	}
	addr := freePort(t)
	public := "http://" + addr
	// The README's commands; the gateway's address is the test's own, so
	// the doubles' consent pages are told where it is.
	vendors := startCommand(t, "practicegw-vendors", exec.Command(vendorsBin, "--gateway", public), os.Interrupt)
	eventually.NoError(t, 30*time.Second, poll, "practicegw-vendors to serve", func() error {
		if vendors.exited() {
			t.Fatalf("practicegw-vendors exited:\n%s", vendors.out.String())
		}
		if !strings.Contains(vendors.out.String(), "Ctrl-C stops them") {
			return fmt.Errorf("it printed %q", vendors.out.String())
		}
		return nil
	})
	for _, name := range []string{"Karbon", "Xero and Xero Practice Manager", "Microsoft Graph", "Google Drive", "Dropbox", "QuickBooks Online"} {
		if !strings.Contains(vendors.out.String(), name) {
			t.Errorf("practicegw-vendors does not say it serves %s:\n%s", name, vendors.out.String())
		}
	}
	g := startGateway(t, gatewayOptions{addr: addr, config: "../config/try-connections.Caddyfile",
		env: []string{"PRACTICEGW_PUBLIC_URL=" + public, "PRACTICEGW_SYNC_POLL=1s"}})
	admin := g.issue("frm_hollis", false, "admin").Token
	reader := g.issue("frm_hollis", false, "clients:read", "invoices:read").Token

	b := newBrowser(t, public)
	b.open("/console", "#token")
	b.do(chromedp.SendKeys(chromedp.ID("token"), admin), chromedp.Click(chromedp.ID("sign-in")))
	b.wait("nav.tabs")
	b.open("/console/systems", "#connect-ledger")
	b.shot("try-01-systems")

	b.do(chromedp.SetValue(chromedp.ID("connect-ledger-system"), "xero"),
		chromedp.Click(chromedp.CSS("#connect-ledger button[type=submit]")))
	b.wait("#allow")
	b.shot("try-02-xero-consent")
	b.do(chromedp.Click(chromedp.ID("allow")))
	b.waitText("#callback-result", "Xero is connected for Hollis & Vane LLP")
	b.do(chromedp.Click(chromedp.ID("systems-link")))
	b.wait("#role-ledger [data-status]")
	b.expect("#role-ledger [data-status]", "connected")

	b.open("/console/systems", "#connect-records")
	b.do(chromedp.SetValue(chromedp.ID("connect-records-system"), "karbon"),
		chromedp.SendKeys(chromedp.ID("connect-records-access-key"), "access-key"),
		chromedp.Click(chromedp.CSS("#connect-records button[type=submit]")))
	b.waitText("#role-records [data-status]", "connected")

	for _, path := range []string{"/v1/clients", "/v1/invoices"} {
		eventually.NoError(t, 30*time.Second, 100*time.Millisecond, path+" to fill", func() error {
			r := g.do(t, "GET", path, reader, nil)
			if r.StatusCode != 200 {
				return fmt.Errorf("%d %s", r.StatusCode, r.body)
			}
			if n := len(r.json(t)["data"].([]any)); n == 0 {
				return fmt.Errorf("no records yet")
			}
			return nil
		})
	}
	b.open("/console/systems", "#role-records")
	b.shot("try-03-systems-connected")
}
