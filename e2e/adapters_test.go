package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

const (
	karbonSigningKey = "karbon-signing-key"
	xeroWebhookKey   = "xero-webhook-key"
)

// vendorFirm starts doubles of Karbon, Xero and Microsoft Graph that speak
// the vendors' published APIs (failing t on any request those do not
// allow), and a gateway whose firm frm_hollis reads and writes through
// them, configured by its Caddyfile alone.
func vendorFirm(t *testing.T) (*gateway, *vendortest.Karbon, *vendortest.Xero) {
	t.Helper()
	return vendorFirmWith(t, nil)
}

// vendorFirmWith is vendorFirm with setup run on the filled doubles before
// the gateway starts. It returns once every sync is live: vendor webhooks
// compare with the read model's copy.
func vendorFirmWith(t *testing.T, setup func(*vendortest.Karbon, *vendortest.Xero)) (*gateway, *vendortest.Karbon, *vendortest.Xero) {
	t.Helper()
	v := startVendors(t, vendorOptions{setup: setup})
	gw := v.gateway(t)
	waitSyncs(t, gw, 10*time.Second, "every sync to be live", allLive)
	return gw, v.k, v.x
}

// vendorOptions sizes the doubles of a vendor firm.
type vendorOptions struct {
	// setup runs on the filled doubles before any gateway starts.
	setup func(*vendortest.Karbon, *vendortest.Xero)
	// contacts and workItems are how many Karbon holds; default 130 and
	// 240.
	contacts, workItems int
}

// vendors are a firm's real systems as doubles, and the Caddyfile of a
// gateway serving frm_hollis from them.
type vendors struct {
	k      *vendortest.Karbon
	x      *vendortest.Xero
	g      *vendortest.Graph
	config string
	env    []string
}

// startVendors fills the doubles: Karbon contacts (Ann Client000, ...)
// and work items (W0000, ...; every fourth in review), an invoice in Xero
// for each of the first 30 contacts, a tax return in SharePoint for each
// of the first 12.
func startVendors(t *testing.T, o vendorOptions) *vendors {
	t.Helper()
	if o.contacts == 0 {
		o.contacts = 130
	}
	if o.workItems == 0 {
		o.workItems = 240
	}
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	k := vendortest.StartKarbon(t)
	k.AddUser(vendortest.KarbonUser{Id: "U1", Name: "Pat Partner", EmailAddress: "pat@hollis.example", Roles: []string{"Partner"}})
	for i := range o.contacts {
		k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann", LastName: fmt.Sprintf("Client%03d", i),
			ContactType: "Client", Email: fmt.Sprintf("ann%d@example.com", i), Country: "GB", OwnerKey: "U1",
			LastModified: epoch, ExternalKey: fmt.Sprintf("xc-%d", i)})
	}
	for i := range o.workItems {
		deadline := epoch.AddDate(0, 0, i).Format(time.RFC3339)
		primary, secondary := "InProgress", ""
		if i%4 == 0 {
			primary, secondary = "InProgress", "In Review"
		}
		k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: fmt.Sprintf("Accounts %d", i),
			AssigneeKey: "U1", ClientKey: fmt.Sprintf("C%03d", i%o.contacts), ClientType: "Contact", StartDate: epoch.Format(time.RFC3339),
			DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: primary, SecondaryStatus: secondary})
	}
	x := vendortest.StartXero(t)
	for i := range min(30, o.contacts) {
		x.AddInvoice(vendortest.XeroInvoice{InvoiceID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), InvoiceNumber: fmt.Sprintf("INV-%04d", i),
			Status: "AUTHORISED", ContactID: fmt.Sprintf("xc-%d", i), ContactName: fmt.Sprintf("Ann Client%03d", i),
			Date: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "1200.00", AmountDue: "1200.00", CurrencyCode: "GBP", Updated: epoch})
	}
	g := vendortest.NewGraph()
	t.Cleanup(g.Close)
	for i := range min(12, o.contacts) {
		g.AddFile(fmt.Sprintf("/Clients/Ann Client%03d/2025/Tax return/Tax return 2025.pdf", i), 120_000, "application/pdf", epoch)
	}
	caddyfile := fmt.Sprintf(`{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}
		firm frm_hollis {
			name "Hollis & Vane LLP"
			records karbon {
				access_key {env.TEST_KARBON_ACCESS_KEY}
				bearer {env.TEST_KARBON_BEARER}
				base_url %s
				stage_map "In Review" in_review
				webhook_signing_key %s
				upstream {
					timeout 2s
					rate_limit 6000/m
				}
			}
			ledger xero {
				tenant_id %s
				access_token %s
				base_url %s
				webhook_key %s
				link_clients records
				upstream {
					daily_limit 1000000
				}
			}
			documents sharepoint {
				drive_id %s
				access_token %s
				base_url %s
				root /Clients
				link_clients records
				notification_url {$TEST_GRAPH_NOTIFY}
			}
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	handle /ingest/frm_hollis/karbon {
		practicegw_ingest frm_hollis records
	}
	handle /ingest/frm_hollis/xero {
		practicegw_ingest frm_hollis ledger
	}
	handle /ingest/* {
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
	handle {
		practicegw_api
	}
}
`, k.URL, karbonSigningKey, x.TenantID, x.Token, x.URL, xeroWebhookKey, g.DriveID, g.Token, g.URL)
	if o.setup != nil {
		o.setup(k, x)
	}
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return &vendors{k: k, x: x, g: g, config: path,
		env: []string{"TEST_KARBON_ACCESS_KEY=" + k.AccessKey, "TEST_KARBON_BEARER=" + k.Bearer}}
}

// gateway starts a gateway serving the firm from the doubles, with env
// added to its environment.
func (v *vendors) gateway(t *testing.T, env ...string) *gateway {
	t.Helper()
	return startGateway(t, gatewayOptions{config: v.config, env: append(append([]string(nil), v.env...), env...)})
}

// syncStates reads /readyz: the detail of each sync check by system
// ("karbon": "live; data confirmed 3s ago").
func syncStates(t testing.TB, g *gateway) map[string]string {
	t.Helper()
	var ready struct {
		Checks []struct {
			Name   string `json:"name"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	r := g.do(t, "GET", "/readyz", "", nil)
	if err := json.Unmarshal(r.body, &ready); err != nil {
		t.Fatalf("/readyz: %v: %s", err, r.body)
	}
	out := map[string]string{}
	for _, c := range ready.Checks {
		if name, ok := strings.CutPrefix(c.Name, "sync "); ok {
			// A system serving two roles (Karbon's records and its
			// billing) has a sync for each: the system is live only
			// when both are.
			system, _, _ := strings.Cut(name, "/")
			if prev, ok := out[system]; !ok || strings.HasPrefix(prev, "live") {
				out[system] = c.Detail
			}
		}
	}
	return out
}

// waitSyncs polls /readyz until cond holds of the syncs' details.
func waitSyncs(t testing.TB, g *gateway, within time.Duration, what string, cond func(map[string]string) bool) map[string]string {
	t.Helper()
	var last map[string]string
	eventually.NoError(t, within, 20*time.Millisecond, what, func() error {
		last = syncStates(t, g)
		if len(last) > 0 && cond(last) {
			return nil
		}
		return fmt.Errorf("syncs: %v", last)
	})
	return last
}

// allLive is a waitSyncs condition: every sync is live.
func allLive(s map[string]string) bool {
	for _, detail := range s {
		if !strings.HasPrefix(detail, "live") {
			return false
		}
	}
	return true
}

// TestFirmOnItsOwnSystems is issue 6's "done": with a Caddyfile naming a
// Karbon practice, a Xero organisation and a SharePoint drive, an
// integration reads and writes through /v1 as it does against the demo
// records, and a change made inside those systems reaches webhook
// subscribers.
func TestFirmOnItsOwnSystems(t *testing.T) {
	g, k, x := vendorFirm(t)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token

	// Paging across Karbon's 100-item pages, never truncated.
	jobs := pageAll(t, g, tok, "/v1/jobs", 50)
	if len(jobs) != 240 {
		t.Fatalf("%d jobs through /v1, want all 240 of Karbon's", len(jobs))
	}
	if n := len(pageAll(t, g, tok, "/v1/jobs?stage=in_review", 50)); n != 60 {
		t.Fatalf("%d jobs in review, want 60", n)
	}
	if n := len(pageAll(t, g, tok, "/v1/clients", 50)); n != 130 {
		t.Fatalf("%d clients, want 130", n)
	}
	invoices := pageAll(t, g, tok, "/v1/invoices", 10)
	if len(invoices) != 30 || invoices[0]["status"] != "issued" || invoices[0]["total"].(map[string]any)["currency"] != "GBP" {
		t.Fatalf("invoices: %d, first %v", len(invoices), invoices[0])
	}
	docs := pageAll(t, g, tok, "/v1/documents", 50)
	if len(docs) != 12 {
		t.Fatalf("%d documents, want 12", len(docs))
	}
	if loc := docs[0]["location"].(map[string]any); loc["provider"] != "sharepoint" || loc["drive_id"] == nil {
		t.Fatalf("document location: %v", loc)
	}
	// Sandbox credentials still reach the seeded demo records.
	sandbox := g.issue("frm_hollis", true, "jobs:read").Token
	if n := len(g.do(t, "GET", "/v1/jobs?limit=200", sandbox, nil).json(t)["data"].([]any)); n != 200 {
		t.Fatalf("sandbox jobs page: %d", n)
	}

	// Subscribers hear about changes made through the API and inside the
	// vendors' systems.
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "job.stage_changed", "invoice.paid")
	rc.setSecrets(secret)

	r := g.do(t, "POST", "/v1/jobs/job_W0001/stage", tok, map[string]any{"stage": "in_review", "note": "Over to Pat"})
	if r.StatusCode != 200 || r.json(t)["stage"] != "in_review" {
		t.Fatalf("move through the API: %d %s", r.StatusCode, r.body)
	}
	if w, _ := k.WorkItem("W0001"); !strings.Contains(w.WorkStatus, "In Review") {
		t.Fatalf("Karbon's work item after the move: %q", w.WorkStatus)
	}
	if got := rc.wait(1, 5*time.Second); got[0].envelope["data"].(map[string]any)["job_id"] != "job_W0001" {
		t.Fatalf("API move event: %v", got[0].envelope)
	}

	// A job moved inside Karbon: Karbon posts its signed webhook.
	k.MoveWorkItem("W0003", "Completed", "")
	body := vendortest.KarbonWebhook("Work", "W0003", "Updated", time.Now())
	if code := postSigned(t, g, "/ingest/frm_hollis/karbon", body, "Signature", vendortest.SignKarbon(karbonSigningKey, body)); code != 200 {
		t.Fatalf("Karbon webhook answered %d", code)
	}
	// The same signed body, captured and posted again, is acknowledged
	// without reading Karbon again.
	reads := func() (n int) {
		for _, r := range k.Requests() {
			if strings.HasPrefix(r, "GET /v3/WorkItems/W0003") {
				n++
			}
		}
		return n
	}
	before := reads()
	for range 10 {
		if code := postSigned(t, g, "/ingest/frm_hollis/karbon", body, "Signature", vendortest.SignKarbon(karbonSigningKey, body)); code != 200 {
			t.Fatalf("a replayed Karbon webhook answered %d", code)
		}
	}
	if n := reads() - before; n != 0 {
		t.Fatalf("10 replays of one Karbon webhook read the work item %d more times", n)
	}
	// An invoice paid in Xero.
	paid := "00000000-0000-0000-0000-000000000004"
	x.Pay(paid, "GoCardless payout", time.Now())
	xbody := vendortest.XeroWebhook(x.TenantID, time.Now(), paid)
	if code := postSigned(t, g, "/ingest/frm_hollis/xero", xbody, "x-xero-signature", vendortest.SignXero(xeroWebhookKey, xbody)); code != 200 {
		t.Fatalf("Xero webhook answered %d", code)
	}
	// The API move, the Karbon move and the Xero payment.
	got := rc.wait(3, 5*time.Second)
	seen := map[string]map[string]any{}
	for _, d := range got {
		data := d.envelope["data"].(map[string]any)
		id, _ := data["job_id"].(string)
		if id == "" {
			id, _ = data["invoice_id"].(string)
		}
		seen[d.envelope["event"].(string)+" "+id] = data
	}
	if d := seen["job.stage_changed job_W0003"]; d == nil || d["stage"] != "completed" {
		t.Fatalf("Karbon move did not arrive as job.stage_changed to completed: %v", seen)
	}
	if d := seen["invoice.paid inv_"+paid]; d == nil || d["settled_via"] != "gocardless" {
		t.Fatalf("Xero payment did not arrive as invoice.paid via gocardless: %v", seen)
	}

	// A forged vendor webhook is refused.
	if code := postSigned(t, g, "/ingest/frm_hollis/karbon", body, "Signature", vendortest.SignKarbon("wrong key", body)); code != 401 {
		t.Fatalf("forged Karbon webhook answered %d", code)
	}
	// Readiness reports each upstream's breaker.
	ready := g.do(t, "GET", "/readyz", "", nil)
	if !strings.Contains(string(ready.body), "upstream karbon/frm_hollis") {
		t.Fatalf("readiness: %s", ready.body)
	}
}

func postSigned(t *testing.T, g *gateway, path string, body []byte, header, sig string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+g.addr+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header, sig)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
