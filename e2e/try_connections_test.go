package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/practicegw/practicegw/internal/eventually"
)

// The README's "Try connections locally", as a newcomer does it:
// practicegw-vendors and config/try-connections.Caddyfile started as it
// says, Xero connected through the double's consent page, Karbon with
// the double's access key and SharePoint through its consent page and the
// choice of a site from the console's Systems page in headless Chromium,
// and /v1 serving their clients, invoices and documents. A client changed
// at the Karbon double, with the README's commands, is Karbon's webhook
// to the trial and an event; practicegw-vendors stopped and started again
// leaves every connection connected (without its state file the Xero
// connection needs reconnecting) and Karbon's next webhook an event.
func TestTryConnectionsLocally(t *testing.T) {
	needChromium(t)
	vendorsBin, err := vendorsBinary()
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	public := "http://" + addr
	// The README's commands; the gateway's address is the test's own, so
	// the doubles' consent pages are told where it is.
	state := filepath.Join(t.TempDir(), "practicegw-vendors.json")
	// The doubles on free ports, never the README's fixed ones: the
	// suite passes beside a trial running on this machine.
	first, origins := freeVendorPorts(t)
	serveVendors := func() *process {
		vendors := startCommand(t, "practicegw-vendors", exec.Command(vendorsBin, "--gateway", public, "--state", state,
			"--port", strconv.Itoa(first)), os.Interrupt)
		eventually.NoError(t, 30*time.Second, poll, "practicegw-vendors to serve", func() error {
			if vendors.exited() {
				t.Fatalf("practicegw-vendors exited:\n%s", vendors.out.String())
			}
			if !strings.Contains(vendors.out.String(), "Ctrl-C stops them") {
				return fmt.Errorf("it printed %q", vendors.out.String())
			}
			return nil
		})
		return vendors
	}
	vendors := serveVendors()
	for _, name := range []string{"Karbon", "Xero and Xero Practice Manager", "Microsoft Graph", "Google Drive", "Dropbox", "QuickBooks Online"} {
		if !strings.Contains(vendors.out.String(), name) {
			t.Errorf("practicegw-vendors does not say it serves %s:\n%s", name, vendors.out.String())
		}
	}
	g := startGateway(t, gatewayOptions{addr: addr, config: "../config/try-connections.Caddyfile",
		env: append(origins, "PRACTICEGW_PUBLIC_URL="+public, "PRACTICEGW_SYNC_POLL=1s")})
	admin := g.issue("frm_hollis", false, "admin").Token
	reader := g.issue("frm_hollis", false, "clients:read", "invoices:read", "documents:read", "engagements:read").Token

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
	b.wait(`#role-ledger [data-status="connected"]`)

	b.open("/console/systems", "#connect-records")
	b.do(chromedp.SetValue(chromedp.ID("connect-records-system"), "karbon"),
		chromedp.SendKeys(chromedp.ID("connect-records-access-key"), "access-key"),
		chromedp.Click(chromedp.CSS("#connect-records button[type=submit]")))
	b.wait(`#role-records [data-status="connected"]`)

	// SharePoint: the consent reaches the double's two sites, Clients
	// (with the files) and Marketing; the Systems page chooses Clients,
	// whose default document library fills /v1/documents.
	b.open("/console/systems", "#connect-documents")
	b.do(chromedp.SetValue(chromedp.ID("connect-documents-system"), "sharepoint"),
		chromedp.Click(chromedp.CSS("#connect-documents button[type=submit]")))
	b.wait("#allow")
	b.do(chromedp.Click(chromedp.ID("allow")))
	b.waitText("#callback-result", "Choose the site")
	b.do(chromedp.Click(chromedp.ID("systems-link")))
	b.wait("#choose-documents")
	b.expect("#choose-documents-tenant", "Clients", "Marketing")
	site, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll("#choose-documents-tenant option")].find(o => o.textContent.trim() == "Clients").value`))
	if err != nil {
		t.Fatalf("the Clients site among the choices: %v", err)
	}
	b.shot("try-04-sharepoint-choose-site")
	b.do(chromedp.SetValue(chromedp.ID("choose-documents-tenant"), site),
		chromedp.Click(chromedp.CSS("#choose-documents button[type=submit]")))
	b.wait(`#role-documents [data-status="connected"]`)
	b.expect("#role-documents [data-tenant]", "Clients")

	for _, path := range []string{"/v1/clients", "/v1/invoices", "/v1/engagements", "/v1/documents"} {
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
	// The engagements are Xero's seeded quotes (Karbon keeps no
	// proposals): the two accepted are signed, one sent, one proposed.
	statuses := map[string]int{}
	for _, e := range g.do(t, "GET", "/v1/engagements", reader, nil).json(t)["data"].([]any) {
		statuses[fmt.Sprint(e.(map[string]any)["status"])]++
	}
	if statuses["signed"] != 2 || statuses["sent"] != 1 || statuses["proposed"] != 1 {
		t.Errorf("the trial's engagements are %v, want 2 signed, 1 sent and 1 proposed", statuses)
	}
	// The documents are the library's, not the site's: Graph names a
	// drive b!…, a site host,guid,guid.
	for _, d := range g.do(t, "GET", "/v1/documents", reader, nil).json(t)["data"].([]any) {
		drive, _ := d.(map[string]any)["location"].(map[string]any)["drive_id"].(string)
		if !strings.HasPrefix(drive, "b!") || drive == site {
			t.Errorf("a document in drive %q (the site chosen is %s)", drive, site)
		}
	}
	b.open("/console/systems", "#role-records")
	b.shot("try-03-systems-connected")

	// Karbon's webhook reaches the trial: the README's commands, as
	// written, a client changed at the double and its event.
	events := g.issue("frm_hollis", false, "events:read").Token
	karbonChange(t, g, events, "C001", "Benedict")

	// A restart of practicegw-vendors keeps what it issued: after every
	// system's full comparison with its vendor, each connection is still
	// connected, its sync live, and Karbon's subscription still delivers.
	vendors.stop()
	restarted := time.Now()
	serveVendors()
	for _, system := range []string{"records", "ledger", "documents"} {
		if _, err := g.cli("sync", "resync", "--firm", "frm_hollis", "--system", system); err != nil {
			t.Fatal(err)
		}
	}
	eventually.NoError(t, 60*time.Second, 200*time.Millisecond, "every connection to be compared with its vendor after the restart", func() error {
		for _, c := range g.do(t, "GET", "/v1/connections", admin, nil).json(t)["data"].([]any) {
			c := c.(map[string]any)
			if c["status"] == "disconnected" {
				continue
			}
			if c["status"] != "connected" {
				t.Fatalf("%s (%s) is %s after the restart: %v", c["system"], c["id"], c["status"], c["reason"])
			}
			for _, sy := range c["sync"].([]any) {
				sy := sy.(map[string]any)
				at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(sy["confirmed_at"]))
				if sy["state"] != "live" || !at.After(restarted) {
					return fmt.Errorf("%s's sync is %v, confirmed at %v", c["system"], sy["state"], sy["confirmed_at"])
				}
			}
		}
		return nil
	})
	karbonChange(t, g, events, "C002", "Beatrix")
}

// karbonChange changes a Karbon client's first name at the double as the
// README's Try connections section does, and holds the event it lists to
// what the README shows, once the webhook has made it.
func karbonChange(t *testing.T, g *gateway, token, contact, name string) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var change, list *readmeCommand
	for _, c := range readmeCommands(string(readme), "The firm's own systems") {
		switch {
		case strings.HasPrefix(c.text, "curl -s -X PATCH http://127.0.0.1:7101/v3/Contacts/"):
			change = &c
		case strings.Contains(c.text, "/v1/events?event=client.updated"):
			list = &c
		}
	}
	if change == nil || list == nil {
		t.Fatal("the README's Try connections section changes no Karbon client, or lists no event of it")
	}
	fill := strings.NewReplacer("localhost:8080", g.addr, "pgw_live_...", token, "C001", contact, "Benedict", name,
		"http://127.0.0.1:7101", karbonOrigin(g))
	run := func(c *readmeCommand) string {
		out, err := exec.Command("bash", "-c", fill.Replace(c.text)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.text, err, out)
		}
		return string(out)
	}
	run(change)
	shown := []string{fill.Replace(list.shown[0])}
	eventually.NoError(t, 20*time.Second, 200*time.Millisecond, "Karbon's webhook to raise client.updated", func() error {
		out := run(list)
		if !strings.Contains(out, `"`+name+" ") {
			return fmt.Errorf("no event of %s's change yet: %s", name, tail(out, 300))
		}
		return printedAsShown(out, shown)
	})
}

// vendorOrigins are the try Caddyfile's variables of the doubles' origins,
// in practicegw-vendors' order from --port.
var vendorOrigins = []string{"TRY_VENDOR_KARBON", "TRY_VENDOR_XERO", "TRY_VENDOR_GRAPH", "TRY_VENDOR_GOOGLE", "TRY_VENDOR_DROPBOX", "TRY_VENDOR_QUICKBOOKS"}

// freeVendorPorts finds six free ports in a row for practicegw-vendors'
// --port, and the try Caddyfile's variables naming them.
func freeVendorPorts(t *testing.T) (int, []string) {
	t.Helper()
	for range 100 {
		first := 20000 + rand.IntN(40000)
		var held []net.Listener
		for i := range len(vendorOrigins) {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", first+i))
			if err != nil {
				break
			}
			held = append(held, ln)
		}
		free := len(held) == len(vendorOrigins)
		for _, ln := range held {
			ln.Close()
		}
		if free {
			env := make([]string, len(vendorOrigins))
			for i, name := range vendorOrigins {
				env[i] = fmt.Sprintf("%s=http://127.0.0.1:%d", name, first+i)
			}
			return first, env
		}
	}
	t.Fatal("no six free ports in a row")
	return 0, nil
}

// karbonOrigin is the Karbon double's origin the gateway g was given.
func karbonOrigin(g *gateway) string {
	for _, kv := range g.env {
		if v, ok := strings.CutPrefix(kv, "TRY_VENDOR_KARBON="); ok {
			return v
		}
	}
	return "http://127.0.0.1:7101"
}
