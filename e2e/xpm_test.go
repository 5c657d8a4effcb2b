package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// xpmFirm is a firm on Xero Practice Manager and SharePoint, with no
// ledger (its XPM invoices are the ledger), as doubles that speak the
// vendors' published APIs (the XPM double fails t on any request XPM's
// description does not allow).
type xpmFirm struct {
	x      *vendortest.XPM
	g      *vendortest.Graph
	config string
}

func xpmStaffID(i int) string  { return fmt.Sprintf("57aff000-0000-4000-8000-%012d", i) }
func xpmClientID(i int) string { return fmt.Sprintf("c11e0000-0000-4000-8000-%012d", i) }

// xpmClientNames are the practice's five clients; the first two have
// SharePoint folders.
var xpmClientNames = []string{"Ashdown Bakery Ltd", "Birch & Co LLP", "Carrow Trust", "Dunmore Ltd", "Elm Street Charity"}

// startXPMFirm fills the doubles: 2 staff, 5 clients, 6 current jobs
// (Planned, In Progress, Awaiting info in turn), 3 approved invoices (the
// first paid by GoCardless) and a CT600 in SharePoint for each of the
// first two clients; and writes the firm's Caddyfile, shaped as
// config/xpm-sharepoint.Caddyfile but pointed at the doubles.
func startXPMFirm(t *testing.T) *xpmFirm {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	x := vendortest.StartXPM(t)
	for i := range 2 {
		x.AddStaff(vendortest.XPMStaff{UUID: xpmStaffID(i), Name: fmt.Sprintf("Staff %d", i), Email: fmt.Sprintf("staff%d@marlowe.example", i)})
	}
	for i, name := range xpmClientNames {
		x.AddClient(vendortest.XPMClient{UUID: xpmClientID(i), Name: name, Email: fmt.Sprintf("books%d@client.example", i),
			Country: "United Kingdom", BusinessStructure: "Limited Company", AccountManager: xpmStaffID(i % 2),
			Contacts: []vendortest.XPMContact{{UUID: fmt.Sprintf("c0a7ac70-0000-4000-8000-%012d", i), Name: "Ann Director",
				Position: "Director", Primary: true, Email: "ann@client.example"}}})
	}
	for i := range 6 {
		x.AddJob(vendortest.XPMJob{ID: fmt.Sprintf("J%06d", i), UUID: fmt.Sprintf("10b00000-0000-4000-8000-%012d", i),
			Name: fmt.Sprintf("Accounts %d", i), ClientUUID: xpmClientID(i % 5), Type: "Accounts",
			State: []string{"Planned", "In Progress", "Awaiting info"}[i%3],
			Start: now.AddDate(0, -1, 0), Due: now.AddDate(0, 2, i), Created: now.AddDate(0, -1, 0), Manager: xpmStaffID(i % 2)})
	}
	for i := range 3 {
		x.AddInvoice(vendortest.XPMInvoice{ID: fmt.Sprintf("I%06d", i), UUID: fmt.Sprintf("1a000000-0000-4000-8000-%012d", i),
			Status: "Approved", ClientUUID: xpmClientID(i), JobID: fmt.Sprintf("J%06d", i), Date: now.AddDate(0, 0, -20),
			Due: now.AddDate(0, 0, 10), Total: "1200.50", Paid: "0.00", Outstanding: "1200.50"})
	}
	x.Pay("I000000", "GoCardless payout", now.AddDate(0, 0, -2))

	g := vendortest.NewGraph()
	t.Cleanup(g.Close)
	for i := range 2 {
		g.AddFile("/Clients/"+xpmClientNames[i]+"/2025/CT600/CT600 2025.pdf", 120_000, "application/pdf", now.AddDate(0, 0, -30))
	}

	caddyfile := fmt.Sprintf(`{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}
		firm frm_marlowe {
			name "Marlowe & Finch Chartered Accountants"
			records xpm {
				tenant_id %s
				access_token {env.TEST_XPM_TOKEN}
				base_url %s
				stage_map "Awaiting info" awaiting_client
				stage_map "Manager review" in_review
				time_zone Europe/London
				modified_overlap 2m
				default_country GB
				currency GBP
				history_years 1
				settlement_rail "GoCardless" gocardless
				note_folder "Gateway"
				upstream {
					timeout 2s
					rate_limit 6000/m
					daily_limit 1000000
				}
			}
			documents sharepoint {
				drive_id %s
				access_token %s
				base_url %s
				root /Clients
				client_depth 1
				link_clients records
				kind "CT600" tax_return
			}
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
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
`, x.TenantID, x.URL, g.DriveID, g.Token, g.URL)
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return &xpmFirm{x: x, g: g, config: path}
}

func (f *xpmFirm) gateway(t *testing.T, env ...string) *gateway {
	t.Helper()
	return startGateway(t, gatewayOptions{config: f.config, env: append([]string{"TEST_XPM_TOKEN=" + f.x.Token}, env...)})
}

// byID indexes records by id.
func byID(items []map[string]any) map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, it := range items {
		m[it["id"].(string)] = it
	}
	return m
}

// TestXPMFirmOnItsOwnSystems: a firm on XPM and SharePoint, served by the
// read model polling every second, reads what XPM holds, writes through
// to XPM and reads its writes back at once, and a job moved inside XPM
// reaches a webhook subscriber as exactly one job.stage_changed.
func TestXPMFirmOnItsOwnSystems(t *testing.T) {
	f := startXPMFirm(t)
	g := f.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	waitSyncs(t, g, 20*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_marlowe", false, allReadWrite...).Token

	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "job.stage_changed")
	rc.setSecrets(secret)

	// Reads answer what the doubles hold.
	clients := byID(pageAll(t, g, tok, "/v1/clients", 2))
	if len(clients) != 5 {
		t.Fatalf("%d clients, want XPM's 5: %v", len(clients), clients)
	}
	if c := clients["cli_"+xpmClientID(1)]; c == nil || c["name"] != "Birch & Co LLP" || c["country"] != "GB" {
		t.Fatalf("client 1: %v", c)
	}
	jobs := byID(pageAll(t, g, tok, "/v1/jobs", 4))
	if len(jobs) != 6 {
		t.Fatalf("%d jobs, want XPM's 6: %v", len(jobs), jobs)
	}
	if j := jobs["job_J000002"]; j == nil || j["stage"] != "awaiting_client" || j["client"] != "cli_"+xpmClientID(2) {
		t.Fatalf("job J000002 (Awaiting info): %v", j)
	}
	people := byID(pageAll(t, g, tok, "/v1/people", 50))
	if p := people["usr_"+xpmStaffID(1)]; len(people) != 2 || p == nil || p["email"] != "staff1@marlowe.example" {
		t.Fatalf("people: %v", people)
	}
	invoices := byID(pageAll(t, g, tok, "/v1/invoices", 2))
	if len(invoices) != 3 {
		t.Fatalf("%d invoices, want XPM's 3: %v", len(invoices), invoices)
	}
	if inv := invoices["inv_I000000"]; inv == nil || inv["status"] != "paid" || inv["settled_via"] != "gocardless" ||
		inv["total"].(map[string]any)["amount"] != "1200.50" || inv["total"].(map[string]any)["currency"] != "GBP" {
		t.Fatalf("paid invoice I000000: %v", inv)
	}
	docs := pageAll(t, g, tok, "/v1/documents", 50)
	if len(docs) != 2 {
		t.Fatalf("%d documents, want SharePoint's 2: %v", len(docs), docs)
	}

	// A client renamed through /v1 is renamed in XPM and reads back at once.
	cid := "cli_" + xpmClientID(3)
	r := g.do(t, "PATCH", "/v1/clients/"+cid, tok, map[string]any{"name": "Dunmore Holdings Ltd"})
	if r.StatusCode != 200 || r.json(t)["name"] != "Dunmore Holdings Ltd" {
		t.Fatalf("rename client: %d %s", r.StatusCode, r.body)
	}
	if c := f.x.Client(xpmClientID(3)); c.Name != "Dunmore Holdings Ltd" {
		t.Fatalf("XPM's client after the rename: %q", c.Name)
	}
	if c := g.do(t, "GET", "/v1/clients/"+cid, tok, nil).json(t); c["name"] != "Dunmore Holdings Ltd" {
		t.Fatalf("client read back after the rename: %v", c)
	}

	// A job moved through /v1 writes the first XPM state mapping to the
	// stage, and reads back at once, singly and in the stage's list.
	r = g.do(t, "POST", "/v1/jobs/job_J000000/stage", tok, map[string]any{"stage": "awaiting_client", "note": "Chasing bank statements"})
	if r.StatusCode != 200 || r.json(t)["stage"] != "awaiting_client" {
		t.Fatalf("move job through the API: %d %s", r.StatusCode, r.body)
	}
	if j := f.x.Job("J000000"); j.State != "Awaiting info" {
		t.Fatalf("XPM's job after the move: state %q, notes %q", j.State, j.Notes)
	}
	if j := g.do(t, "GET", "/v1/jobs/job_J000000", tok, nil).json(t); j["stage"] != "awaiting_client" {
		t.Fatalf("job read back after the move: %v", j)
	}
	if _, ok := byID(pageAll(t, g, tok, "/v1/jobs?stage=awaiting_client", 50))["job_J000000"]; !ok {
		t.Fatal("the moved job is missing from ?stage=awaiting_client")
	}
	if got := rc.wait(1, 10*time.Second); got[0].envelope["data"].(map[string]any)["job_id"] != "job_J000000" {
		t.Fatalf("API move event: %v", got[0].envelope)
	}

	// A job completed inside XPM (no webhook: XPM sends none) is noticed
	// by polling: one job.stage_changed with the mapped stage.
	f.x.MoveJob("J000004", "Completed")
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "a job.stage_changed for job_J000004", func() error {
		got := rc.wait(0, 0)
		for _, d := range got {
			if d.envelope["data"].(map[string]any)["job_id"] == "job_J000004" {
				return nil
			}
		}
		return fmt.Errorf("deliveries: %d", len(got))
	})
	if j := g.do(t, "GET", "/v1/jobs/job_J000004", tok, nil).json(t); j["stage"] != "completed" || j["closed_at"] == nil {
		t.Fatalf("job_J000004 after the poll: %v", j)
	}

	// More polls raise nothing again: each change was one event.
	waitPolls(t, g, tok, 2)
	perJob := map[string][]map[string]any{}
	for _, d := range rc.wait(0, 0) {
		if d.envelope["event"] != "job.stage_changed" {
			t.Errorf("unexpected event %v", d.envelope["event"])
		}
		data := d.envelope["data"].(map[string]any)
		perJob[data["job_id"].(string)] = append(perJob[data["job_id"].(string)], data)
	}
	if len(perJob) != 2 || len(perJob["job_J000000"]) != 1 || len(perJob["job_J000004"]) != 1 {
		t.Fatalf("job.stage_changed deliveries by job, want one each for job_J000000 and job_J000004: %v", perJob)
	}
	if d := perJob["job_J000004"][0]; d["stage"] != "completed" {
		t.Fatalf("XPM move event: %v", d)
	}
	if d := perJob["job_J000000"][0]; d["stage"] != "awaiting_client" {
		t.Fatalf("API move event: %v", d)
	}
}
