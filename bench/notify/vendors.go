package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/testgateway"
)

// vendors are the doubles of the systems measured, one firm each.
type vendors struct {
	o      options
	on     map[string]bool
	notify string // the proxy the vendors notify, http://host:port
	k      *vendortest.Karbon
	x      *vendortest.Xero
	q      *vendortest.QuickBooks
	g      *vendortest.Graph
	d      *vendortest.GDrive
	b      *vendortest.Dropbox
	// calls note the gateway's calls to each system's double.
	calls map[string]*callLog
}

const (
	karbonSigningKey = "bench-karbon-signing-key-0001"
	xeroWebhookKey   = "bench-xero-webhook-key"
	seeded           = 300
)

var epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func startVendors(o options, notify string, on map[string]bool) *vendors {
	v := &vendors{o: o, on: on, notify: notify, calls: map[string]*callLog{}}
	// logged puts a call log in front of a double's base (its origin and
	// then path).
	logged := func(system, base, path string) string {
		c := newCallLog(strings.TrimSuffix(base, path))
		v.calls[system] = c
		return c.url() + path
	}
	if on["karbon"] {
		v.k = vendortest.NewKarbon()
		v.k.AddUser(vendortest.KarbonUser{Id: "U1", Name: "Pat Partner", EmailAddress: "pat@bench.example", Roles: []string{"Partner"}})
		for i := range 20 {
			v.k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann", LastName: fmt.Sprintf("Client%03d", i),
				ContactType: "Client", Email: fmt.Sprintf("ann%d@example.com", i), Country: "GB", OwnerKey: "U1", LastModified: epoch})
		}
		for i := range seeded {
			v.k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: fmt.Sprintf("Accounts %d", i),
				AssigneeKey: "U1", ClientKey: fmt.Sprintf("C%03d", i%20), ClientType: "Contact", StartDate: epoch.Format(time.RFC3339),
				WorkType: "Accounts", PrimaryStatus: "InProgress"})
		}
		v.k.NotifyChanges(o.karbonWindow)
		v.k.URL = logged("karbon", v.k.URL, "")
	}
	if on["xero"] {
		v.x = vendortest.NewXero()
		for i := range seeded {
			v.x.AddInvoice(vendortest.XeroInvoice{InvoiceID: xeroID(i), InvoiceNumber: fmt.Sprintf("INV-%04d", i), Status: "AUTHORISED",
				ContactID: fmt.Sprintf("xc-%d", i), ContactName: fmt.Sprintf("Client %d", i), Date: epoch, DueDate: epoch.AddDate(0, 1, 0),
				Total: "1200.00", AmountDue: "1200.00", CurrencyCode: "GBP", Updated: epoch})
		}
		v.x.URL = logged("xero", v.x.URL, "/api.xro/2.0")
	}
	if on["quickbooks"] {
		v.q = vendortest.NewQuickBooks()
		for i := range seeded {
			v.q.AddInvoice(vendortest.QBInvoice{ID: fmt.Sprint(i + 1), DocNumber: fmt.Sprintf("%04d", 1000+i), CustomerID: fmt.Sprint(1 + i%7),
				CustomerName: fmt.Sprintf("Customer %d", 1+i%7), TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "300.00", Updated: epoch})
		}
		v.q.NotifyEvery(notify+"/ingest/frm_qbo/quickbooks", o.intuitPeriod)
		v.q.URL = logged("quickbooks", v.q.URL, "")
	}
	if on["sharepoint"] {
		v.g = vendortest.NewGraph()
		seedFiles(v.g.AddFile)
		v.g.URL = logged("sharepoint", v.g.URL, "/v1.0")
	}
	if on["google_drive"] {
		v.d = vendortest.NewGDrive()
		seedFiles(v.d.AddFile)
		v.d.URL = logged("google_drive", v.d.URL, "/drive/v3")
	}
	if on["dropbox"] {
		v.b = vendortest.NewDropbox()
		seedFiles(func(p string, size int64, _ string, at time.Time) string { return v.b.AddFile(p, size, at) })
		v.b.URL = logged("dropbox", v.b.URL, "")
	}
	return v
}

func seedFiles(add func(p string, size int64, mime string, at time.Time) string) {
	for i := range 50 {
		add(fmt.Sprintf("/Clients/Client %02d/2025/Tax return/Tax return 2025.pdf", i), 120_000, "application/pdf", epoch)
	}
}

func xeroID(i int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012d", i) }

func (v *vendors) close() {
	for _, c := range v.calls {
		c.close()
	}
	if v.k != nil {
		v.k.Close()
	}
	if v.x != nil {
		v.x.Close()
	}
	if v.q != nil {
		v.q.Close()
	}
	if v.g != nil {
		v.g.Close()
	}
	if v.d != nil {
		v.d.Close()
	}
	if v.b != nil {
		v.b.Close()
	}
}

// caddyfile is the gateway's configuration: one firm per system, with the
// defaults but what the doubles need, and the front door of vendor
// webhooks.
func (v *vendors) caddyfile(before bool) string {
	var firms strings.Builder
	notifyURL := func(firm, system string) string {
		if before {
			return ""
		}
		return "\n\t\t\t\tnotification_url " + v.notify + "/ingest/" + firm + "/" + system
	}
	if v.k != nil {
		fmt.Fprintf(&firms, `		firm frm_karbon {
			records karbon {
				access_key {env.BENCH_KARBON_KEY}
				bearer {env.BENCH_KARBON_BEARER}
				base_url %s
				webhook_signing_key %s
			}
		}
`, v.k.URL, karbonSigningKey)
	}
	if v.x != nil {
		fmt.Fprintf(&firms, `		firm frm_xero {
			ledger xero {
				tenant_id %s
				access_token %s
				base_url %s
				webhook_key %s
			}
		}
`, v.x.TenantID, v.x.Token, v.x.URL, xeroWebhookKey)
	}
	if v.q != nil {
		fmt.Fprintf(&firms, `		firm frm_qbo {
			ledger quickbooks {
				realm_id %s
				access_token %s
				base_url %s
				verifier_token %s
			}
		}
`, v.q.RealmID, v.q.Token, v.q.URL, v.q.VerifierToken)
	}
	if v.g != nil {
		fmt.Fprintf(&firms, `		firm frm_sp {
			documents sharepoint {
				drive_id %s
				access_token %s
				base_url %s
				root /Clients%s
			}
		}
`, v.g.DriveID, v.g.Token, v.g.URL, notifyURL("frm_sp", "sharepoint"))
	}
	if v.d != nil {
		fmt.Fprintf(&firms, `		firm frm_gd {
			documents google_drive {
				access_token %s
				base_url %s
				root_folder_id root%s
			}
		}
`, v.d.Token, v.d.URL, notifyURL("frm_gd", "google_drive"))
	}
	if v.b != nil {
		secret := ""
		if !before {
			secret = "\n\t\t\t\tapp_secret " + v.b.Identity.ClientSecret
		}
		fmt.Fprintf(&firms, `		firm frm_db {
			documents dropbox {
				access_token %s
				base_url %s
				root /Clients%s
			}
		}
`, v.b.Token, v.b.URL, secret)
	}
	return `{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
` + firms.String() + `	}
}

http://{$PRACTICEGW_LISTEN} {
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
	handle {
		practicegw_api
	}
}
`
}

func (v *vendors) env() []string {
	if v.k == nil {
		return nil
	}
	return []string{"BENCH_KARBON_KEY=" + v.k.AccessKey, "BENCH_KARBON_BEARER=" + v.k.Bearer}
}

// firms are the firms the gateway serves, with the events each burst
// waits for.
func (v *vendors) firms() map[string][]string {
	out := map[string][]string{}
	if v.k != nil {
		out["frm_karbon"] = []string{"job.stage_changed", "job.deleted"}
	}
	if v.x != nil {
		out["frm_xero"] = []string{"invoice.paid"}
	}
	if v.q != nil {
		out["frm_qbo"] = []string{"invoice.paid", "invoice.deleted"}
	}
	for firm, on := range map[string]bool{"frm_sp": v.g != nil, "frm_gd": v.d != nil, "frm_db": v.b != nil} {
		if on {
			out[firm] = []string{"document.filed", "document.deleted"}
		}
	}
	return out
}

// afterStart does what the firm's operator does once the gateway runs
// (Karbon's subscriptions, Dropbox's webhook URI), registers the
// integration's endpoint for each firm, and waits for every sync to be
// live and for the subscriptions the gateway makes itself.
func (v *vendors) afterStart(g *testgateway.Gateway, rc *receiver) error {
	for firm, events := range v.firms() {
		tok, err := g.Issue(testgateway.Credential{Firm: firm, Scopes: []string{"webhooks:read", "webhooks:write", "events:read"}})
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]any{"url": rc.url(), "events": events, "description": "bench"})
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/webhook_endpoints", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("%s: register the endpoint: %s", firm, resp.Status)
		}
	}
	if v.k != nil {
		body := fmt.Sprintf(`{"TargetUrl":%q,"WebhookType":"Work","SigningKey":%q}`, v.notify+"/ingest/frm_karbon/karbon", karbonSigningKey)
		req, _ := http.NewRequest(http.MethodPost, v.k.URL+"/v3/WebhookSubscriptions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+v.k.Bearer)
		req.Header.Set("AccessKey", v.k.AccessKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("karbon subscription: %s", resp.Status)
		}
	}
	if err := waitLive(g, 3*time.Minute); err != nil {
		return err
	}
	if v.b != nil {
		if err := v.b.RegisterWebhook(v.notify + "/ingest/frm_db/dropbox"); err != nil {
			fmt.Println("Dropbox's webhook is not registered (the gateway did not answer its challenge):", err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !v.o.before {
		if (v.g == nil || len(v.g.Subscriptions()) > 0) && (v.d == nil || len(v.d.Channels()) > 0) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// waitLive waits until /readyz says every sync is live.
func waitLive(g *testgateway.Gateway, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(g.URL + "/readyz")
		if err == nil {
			var ready struct {
				Checks []struct{ Name, Detail string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&ready)
			resp.Body.Close()
			live, n := true, 0
			var states []string
			for _, c := range ready.Checks {
				if strings.HasPrefix(c.Name, "sync ") {
					n++
					live = live && strings.HasPrefix(c.Detail, "live")
					states = append(states, c.Name+": "+c.Detail)
				}
			}
			last = strings.Join(states, "; ")
			if n > 0 && live {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the syncs are not live within %s: %s", within, last)
}

// scenarios are each system's bursts.
func (v *vendors) scenarios() []scenario {
	var out []scenario
	now := func() time.Time { return time.Now().UTC() }
	if v.k != nil {
		out = append(out, scenario{system: "karbon", calls: v.calls["karbon"], label: "Karbon", path: "/ingest/frm_karbon/karbon", bursts: []burst{
			{event: "job.stage_changed", order: 1, change: func(i int) (string, error) {
				key := fmt.Sprintf("W%04d", i)
				v.k.MoveWorkItem(key, "InProgress", "In Review")
				return "job_" + key, nil
			}, names: func(b []byte, i int) bool {
				return bytes.Contains(b, fmt.Appendf(nil, `"ResourcePermaKey":"W%04d"`, i))
			}},
			{event: "job.deleted", order: 2, change: func(i int) (string, error) {
				key := fmt.Sprintf("W%04d", 100+i)
				v.k.RemoveWorkItem(key)
				return "job_" + key, nil
			}, names: func(b []byte, i int) bool {
				return bytes.Contains(b, fmt.Appendf(nil, `"ResourcePermaKey":"W%04d"`, 100+i))
			}},
		}})
	}
	if v.x != nil {
		out = append(out, scenario{system: "xero", calls: v.calls["xero"], label: "Xero", path: "/ingest/frm_xero/xero", bursts: []burst{
			{event: "invoice.paid", order: 3, change: func(i int) (string, error) {
				id := xeroID(i)
				at := now()
				v.x.Pay(id, "bench", at)
				// Xero sends at once.
				body := vendortest.XeroWebhook(v.x.TenantID, at, id)
				go postSigned(v.notify+"/ingest/frm_xero/xero", body, "x-xero-signature", vendortest.SignXero(xeroWebhookKey, body))
				return "inv_" + id, nil
			}, names: func(b []byte, i int) bool { return bytes.Contains(b, []byte(xeroID(i))) }},
		}})
	}
	if v.q != nil {
		names := func(off int) func([]byte, int) bool {
			return func(b []byte, i int) bool {
				return bytes.Contains(b, fmt.Appendf(nil, `"intuitentityid":"%d"`, off+i+1))
			}
		}
		out = append(out, scenario{system: "quickbooks", calls: v.calls["quickbooks"], label: "QuickBooks Online", path: "/ingest/frm_qbo/quickbooks", bursts: []burst{
			{event: "invoice.paid", order: 4, change: func(i int) (string, error) {
				v.q.Pay(fmt.Sprint(i+1), "Visa", "", now())
				return fmt.Sprintf("inv_qb-%d", i+1), nil
			}, names: names(0), period: v.o.intuitPeriod},
			{event: "invoice.deleted", order: 5, change: func(i int) (string, error) {
				v.q.Delete(fmt.Sprint(100+i+1), now())
				return fmt.Sprintf("inv_qb-%d", 100+i+1), nil
			}, names: names(100), period: v.o.intuitPeriod},
		}})
	}
	docs := func(system, label, firm string, order int, add func(p string, at time.Time) string, del func(id string)) scenario {
		var ids []string
		return scenario{system: system, calls: v.calls[system], label: label, path: "/ingest/" + firm + "/" + system, bursts: []burst{
			{event: "document.filed", order: order, change: func(i int) (string, error) {
				id := add(fmt.Sprintf("/Clients/Client %02d/2025/Tax return/Engagement letter %03d.pdf", i%50, i), now())
				ids = append(ids, id)
				return filing.DocID(id), nil
			}},
			{event: "document.deleted", order: order + 1, change: func(i int) (string, error) {
				del(ids[i])
				return filing.DocID(ids[i]), nil
			}},
		}}
	}
	if v.g != nil {
		out = append(out, docs("sharepoint", "SharePoint", "frm_sp", 6, func(p string, at time.Time) string {
			return v.g.AddFile(p, 8_000, "application/pdf", at)
		}, v.g.Delete))
	}
	if v.d != nil {
		out = append(out, docs("google_drive", "Google Drive", "frm_gd", 8, func(p string, at time.Time) string {
			return v.d.AddFile(p, 8_000, "application/pdf", at)
		}, v.d.Delete))
	}
	if v.b != nil {
		out = append(out, docs("dropbox", "Dropbox", "frm_db", 10, func(p string, at time.Time) string {
			return v.b.AddFile(p, 8_000, at)
		}, v.b.Delete))
	}
	return out
}

func postSigned(url string, body []byte, header, sig string) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header, sig)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}
