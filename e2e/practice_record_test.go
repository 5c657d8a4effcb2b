package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// The practice record over every pairing of a firm's real systems (issue
// 39's "How it is shown"): for each of records (Karbon, XPM) × ledger
// (Xero, QuickBooks Online, Karbon's billing) × document store
// (SharePoint, Google Drive, Dropbox), one firm whose Caddyfile block
// names the three and one whose administrator connects them through
// /v1/connections, all served by one gateway (bbolt) or two sharing Redis,
// over one set of vendor doubles. Each firm's records keep the contract
// whichever system they came from:
//
//   - every reference resolves: each id a record names is null or answers
//     200 to GET /v1/<collection>/<id> with the same credential;
//   - a change made in each vendor's double moves the record's version,
//     updated_at, its place in updated_since and its event;
//   - no body holds a zero time, an escaped <, > or &, or an empty string
//     where the OpenAPI document allows null;
//   - a vendor that stops answering (its double answers 503 to every call)
//     turns every kind it serves away from Data-State live;
//   - a ledger's or document store's record for a name two clients share
//     links to neither, and no created_at is later than the doubles'
//     records were made.
//
// A change or an outage is waited for as long as the kind's sync plans to
// poll it (the admin API's poll_seconds), at least 20s; a plan that polls
// less often than maxWait (a connection on the vendor's published daily
// allowance) is logged as not checked rather than waited for.
//
// The checks report every failure, naming the firm, the system, the
// record and the field, and go on: one run lists all that is wrong.

// pairing is one firm's three systems, by the vendor double serving each
// (a Karbon billing ledger is served by the Karbon double).
type pairing struct{ records, ledger, documents string }

var (
	recordSystems   = []string{"karbon", "xpm"}
	ledgerSystems   = []string{"xero", "quickbooks", "karbon_billing"}
	documentSystems = []string{"sharepoint", "google_drive", "dropbox"}
)

var shortName = map[string]string{"karbon": "kar", "xpm": "xpm", "xero": "xro", "quickbooks": "qbo", "karbon_billing": "kbl",
	"sharepoint": "shp", "google_drive": "gdr", "dropbox": "dbx"}

func allPairings() []pairing {
	var out []pairing
	for _, r := range recordSystems {
		for _, l := range ledgerSystems {
			for _, d := range documentSystems {
				out = append(out, pairing{r, l, d})
			}
		}
	}
	return out
}

// recordFirm is one firm of the matrix.
type recordFirm struct {
	id        string
	p         pairing
	connected bool   // its systems are connections, not Caddyfile blocks
	token     string // a live credential with every read and write scope
	rc        *receiver
	polls     map[string]time.Duration // each collection's planned poll

}

func (f *recordFirm) String() string {
	how := "Caddyfile"
	if f.connected {
		how = "connected"
	}
	return fmt.Sprintf("%s (%s/%s/%s, %s)", f.id, f.p.records, f.p.ledger, f.p.documents, how)
}

// double is the vendor double a firm's system is served by.
func doubleOf(system string) string {
	if system == "karbon_billing" {
		return "karbon"
	}
	return system
}

// served is which collections each double serves the firm, by the
// contract's Sources: engagements come from XPM's quotes, else the
// ledger's quotes or estimates, else (Karbon with its own billing) they
// are an empty list as fresh as the records' clients.
func (f *recordFirm) served() map[string][]string {
	out := map[string][]string{}
	add := func(double string, colls ...string) { out[double] = append(out[double], colls...) }
	add(f.p.records, "clients", "jobs", "people")
	switch {
	case f.p.records == "xpm":
		add("xpm", "engagements")
	case f.p.ledger == "xero" || f.p.ledger == "quickbooks":
		add(f.p.ledger, "engagements")
	default:
		add(f.p.records, "engagements")
	}
	add(doubleOf(f.p.ledger), "invoices")
	add(f.p.documents, "documents")
	return out
}

// systemOf is the double serving a collection to the firm.
func (f *recordFirm) systemOf(coll string) string {
	for d, colls := range f.served() {
		if slices.Contains(colls, coll) {
			return d
		}
	}
	return "?"
}

// recordWorld is the vendor doubles every firm of a run reads, the
// practicegw-vendors set (vendortest.Local) on free ports, with records
// that exercise matching and escaping added to its seeds.
type recordWorld struct {
	l     *vendortest.Local
	epoch time.Time
}

// Names with & and < that every system holds for one client, and a name
// two records clients share (a ledger customer or folder of that name
// matches neither for certain).
const (
	trickyClient = "Dunmore & Sons <Holdings> Ltd"
	twinClient   = "Ann Twin"
)

func startRecordWorld(t *testing.T, public string) *recordWorld {
	t.Helper()
	first, _ := freeVendorPorts(t)
	l, err := vendortest.ServeLocal(vendortest.LocalOptions{Host: "127.0.0.1", First: first, Gateway: public})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	w := &recordWorld{l: l, epoch: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	epoch := w.epoch
	deadline := epoch.AddDate(0, 2, 0).Format(time.RFC3339)

	k := l.Karbon
	k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: "O001", FullName: trickyClient, ContactType: "Client",
		EntityType: "Corporation", Email: "books@dunmore.example", Country: "GB", OwnerKey: "U1", LastModified: epoch})
	for i, key := range []string{"C100", "C101"} {
		k.AddContact(vendortest.KarbonContact{ContactKey: key, FirstName: "Ann", LastName: "Twin", ContactType: "Client",
			Email: fmt.Sprintf("twin%d@example.com", i), Country: "GB", OwnerKey: "U1", LastModified: epoch})
	}
	k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: "W0100", Title: "Accounts & VAT <2025>", AssigneeKey: "U1",
		ClientKey: "O001", ClientType: "Organization", StartDate: epoch.Format(time.RFC3339), DeadlineDate: &deadline,
		WorkType: "Accounts", PrimaryStatus: "InProgress"})
	for i, c := range []struct{ key, typ, name string }{{"C000", "Contact", "Ada Client"}, {"O001", "Organization", trickyClient},
		{"C100", "Contact", twinClient}} {
		k.AddInvoice(vendortest.KarbonInvoice{InvoiceKey: fmt.Sprintf("KI%03d", i), InvoiceNumber: fmt.Sprintf("KIN-%04d", i),
			ClientKey: c.key, ClientType: c.typ, ClientName: c.name, Total: "600.00", Tax: "100.00", CurrencyCode: "GBP",
			Status: "AwaitingPayment", InvoiceDate: epoch, DueDate: epoch.AddDate(0, 0, 14), CreatedAt: epoch, UpdatedAt: epoch})
	}

	x := l.XPM
	x.AddStaff(vendortest.XPMStaff{UUID: "57aff000-0000-4000-8000-000000000001", Name: "Pat Partner", Email: "pat@hollis.example"})
	x.AddClient(vendortest.XPMClient{UUID: "c0000000-0000-0000-0000-000000000100", Name: trickyClient, Email: "books@dunmore.example",
		Country: "United Kingdom", BusinessStructure: "Limited Company", AccountManager: "57aff000-0000-4000-8000-000000000001", Modified: epoch})
	for i := range 2 {
		x.AddClient(vendortest.XPMClient{UUID: fmt.Sprintf("c0000000-0000-0000-0000-00000000020%d", i), Name: twinClient,
			Email: fmt.Sprintf("twin%d@example.com", i), Country: "United Kingdom", Modified: epoch})
	}
	x.AddJob(vendortest.XPMJob{ID: "J000100", UUID: "j0000000-0000-0000-0000-000000000100", Name: "Accounts & VAT <2025>",
		ClientUUID: "c0000000-0000-0000-0000-000000000100", State: "In Progress", Type: "Accounts", Start: epoch,
		Due: epoch.AddDate(0, 2, 0), Created: epoch, Manager: "57aff000-0000-4000-8000-000000000001"})
	x.AddQuote(vendortest.XPMQuote{ID: "Q000100", Name: "Year-end accounts & tax", Type: "Quote", State: "Issued",
		ClientUUID: "c0000000-0000-0000-0000-000000000100", Date: epoch, Valid: epoch.AddDate(0, 1, 0), Amount: "1500.00",
		Tax: "300.00", Tasks: []string{"Accounts preparation"}})

	xr := l.Xero
	for i, c := range []struct{ id, name string }{{"xc-dunmore", trickyClient}, {"xc-twin", twinClient}} {
		xr.AddInvoice(vendortest.XeroInvoice{InvoiceID: fmt.Sprintf("00000000-0000-0000-0001-%012d", i), InvoiceNumber: fmt.Sprintf("INV-%04d", 100+i),
			Status: "AUTHORISED", ContactID: c.id, ContactName: c.name, Date: epoch, DueDate: epoch.AddDate(0, 1, 0),
			Total: "480.00", AmountDue: "480.00", CurrencyCode: "GBP", Updated: epoch})
	}
	xr.AddQuote(vendortest.XeroQuote{QuoteID: "00000000-0000-0000-0002-000000000001", QuoteNumber: "QU-0100", Title: "Year-end accounts & tax",
		Status: "SENT", ContactID: "xc-dunmore", ContactName: trickyClient, Date: epoch, Expiry: epoch.AddDate(0, 1, 0),
		Lines: []string{"Accounts preparation"}, Total: "1800.00", CurrencyCode: "GBP", Updated: epoch})

	q := l.QuickBooks
	for i, c := range []struct{ id, name string }{{"90", trickyClient}, {"91", twinClient}} {
		q.AddInvoice(vendortest.QBInvoice{ID: strconv.Itoa(190 + i), DocNumber: fmt.Sprintf("19%02d", i), CustomerID: c.id, CustomerName: c.name,
			TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "450.00", Balance: "450.00", Created: epoch, Updated: epoch})
	}
	q.AddEstimate(vendortest.QBEstimate{ID: "300", DocNumber: "E0300", CustomerID: "90", CustomerName: trickyClient, TxnDate: epoch,
		Lines: []string{"Bookkeeping"}, Total: "300.00", Status: "Pending", Created: epoch, Updated: epoch})

	for _, name := range []string{trickyClient, twinClient} {
		p := "/Clients/" + name + "/2025/Tax return/Tax return 2025.pdf"
		l.Graph.AddFile(p, 120_000, "application/pdf", epoch)
		l.GDrive.AddFile(p, 120_000, "application/pdf", epoch)
		l.Dropbox.AddFile(p, 120_000, epoch)
	}
	return w
}

// faults is the double's outage switch.
func (w *recordWorld) faults(double string) *vendortest.Faults {
	switch double {
	case "karbon":
		return &w.l.Karbon.Faults
	case "xpm":
		return &w.l.XPM.Faults
	case "xero":
		return &w.l.Xero.Faults
	case "quickbooks":
		return &w.l.QuickBooks.Faults
	case "sharepoint":
		return &w.l.Graph.Faults
	case "google_drive":
		return &w.l.GDrive.Faults
	case "dropbox":
		return &w.l.Dropbox.Faults
	}
	panic("no double " + double)
}

// identity is the identity service a connection of system consents at.
func (w *recordWorld) identity(system string) *vendortest.Identity {
	switch system {
	case "xero":
		return w.l.Xero.Identity
	case "xpm":
		return w.l.XPM.Identity
	case "quickbooks":
		return w.l.QuickBooks.Identity
	case "sharepoint":
		return w.l.Graph.Identity
	case "google_drive":
		return w.l.GDrive.Identity
	case "dropbox":
		return w.l.Dropbox.Identity
	}
	panic("no identity for " + system)
}

// block is the Caddyfile block of a firm's system, pointed at the doubles.
func (w *recordWorld) block(f *recordFirm, role, system string) string {
	l := w.l
	switch system {
	case "karbon":
		return fmt.Sprintf(`%s karbon {
				access_key %s
				bearer %s
				base_url %s
				webhook_signing_key %s
				upstream {
					rate_limit 6000/m
				}
			}`, role, karbonKey(f), l.Karbon.Bearer, l.Karbon.URL, karbonSigningKey)
	case "xpm":
		_, refresh := l.Xero.Identity.Consent("offline_access practicemanager.client practicemanager.job practicemanager.read")
		return fmt.Sprintf(`records xpm {
				tenant_id %s
				client_id %s
				client_secret %s
				refresh_token %s
				token_url %s
				base_url %s
				upstream {
					daily_limit 1000000
				}
			}`, xeroTenant(f), l.Xero.Identity.ClientID, l.Xero.Identity.ClientSecret, refresh, l.Xero.Identity.TokenURL(), l.XPM.URL)
	case "xero":
		_, refresh := l.Xero.Identity.Consent("offline_access accounting.invoices.read")
		return fmt.Sprintf(`ledger xero {
				tenant_id %s
				client_id %s
				client_secret %s
				refresh_token %s
				token_url %s
				base_url %s
				webhook_key %s
				link_clients records
				upstream {
					daily_limit 1000000
				}
			}`, xeroTenant(f), l.Xero.Identity.ClientID, l.Xero.Identity.ClientSecret, refresh, l.Xero.Identity.TokenURL(), l.Xero.URL, xeroWebhookKey)
	case "quickbooks":
		return fmt.Sprintf(`ledger quickbooks {
				realm_id %s
				access_token %s
				base_url %s
				verifier_token %s
				link_clients records
				upstream {
					daily_limit -1
				}
			}`, l.QuickBooks.RealmID, l.QuickBooks.Token, l.QuickBooks.URL, l.QuickBooks.VerifierToken)
	case "sharepoint":
		return fmt.Sprintf(`documents sharepoint {
				drive_id %s
				access_token %s
				base_url %s
				root /Clients
				link_clients records
			}`, l.Graph.DriveID, l.Graph.Token, l.Graph.URL)
	case "google_drive":
		return fmt.Sprintf(`documents google_drive {
				access_token %s
				base_url %s
				root_path /Clients
				link_clients records
			}`, l.GDrive.Token, l.GDrive.URL)
	case "dropbox":
		return fmt.Sprintf(`documents dropbox {
				access_token %s
				base_url %s
				root /Clients
				link_clients records
			}`, l.Dropbox.Token, l.Dropbox.URL)
	}
	panic("no block for " + system)
}

// caddyfile is one gateway's configuration: the doubles' apps in its
// connect block, and every firm of the matrix.
func (w *recordWorld) caddyfile(t *testing.T, public string, firms []*recordFirm) string {
	t.Helper()
	l := w.l
	var b strings.Builder
	fmt.Fprintf(&b, `{
	admin {$PRACTICEGW_ADMIN}
	persist_config off
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}
		connect {
			public_url %s
			karbon {
				bearer %s
				base_url %s
			}
			xero {
				client_id %s
				client_secret %s
				authorize_url %s
				token_url %s
				revoke_url %s
				connections_url %s
				base_url %s
			}
			sharepoint {
				client_id %s
				client_secret %s
				authorize_url %s
				token_url %s
				base_url %s
			}
			google_drive {
				client_id %s
				client_secret %s
				authorize_url %s
				token_url %s
				revoke_url %s
				base_url %s
			}
			dropbox {
				client_id %s
				client_secret %s
				authorize_url %s
				token_url %s
				revoke_url %s
				base_url %s
			}
			quickbooks {
				client_id %s
				client_secret %s
				authorize_url %s
				token_url %s
				revoke_url %s
				base_url %s
				verifier_token %s
			}
		}
`, public, l.Karbon.Bearer, l.Karbon.URL,
		l.Xero.Identity.ClientID, l.Xero.Identity.ClientSecret, l.Xero.Identity.AuthorizeURL(), l.Xero.Identity.TokenURL(),
		l.Xero.Identity.RevokeURL(), l.Xero.ConnectionsURL(), l.Xero.Identity.URL,
		l.Graph.Identity.ClientID, l.Graph.Identity.ClientSecret, l.Graph.Identity.AuthorizeURL(), l.Graph.Identity.TokenURL(), l.Graph.Identity.URL,
		l.GDrive.Identity.ClientID, l.GDrive.Identity.ClientSecret, l.GDrive.Identity.AuthorizeURL(), l.GDrive.Identity.TokenURL(),
		l.GDrive.Identity.RevokeURL(), l.GDrive.Identity.URL,
		l.Dropbox.Identity.ClientID, l.Dropbox.Identity.ClientSecret, l.Dropbox.Identity.AuthorizeURL(), l.Dropbox.Identity.TokenURL(),
		l.Dropbox.Identity.RevokeURL(), l.Dropbox.Identity.URL,
		l.QuickBooks.Identity.ClientID, l.QuickBooks.Identity.ClientSecret, l.QuickBooks.Identity.AuthorizeURL(), l.QuickBooks.Identity.TokenURL(),
		l.QuickBooks.Identity.RevokeURL(), l.QuickBooks.Identity.URL, l.QuickBooks.VerifierToken)
	for _, f := range firms {
		fmt.Fprintf(&b, "\t\tfirm %s {\n\t\t\tname %q\n", f.id, "Practice "+f.id)
		if !f.connected {
			b.WriteString("\t\t\t" + w.block(f, "records", f.p.records) + "\n")
			switch {
			case f.p.ledger == "karbon_billing" && f.p.records == "karbon":
				// Karbon's billing is the ledger of a Karbon firm that names none.
			case f.p.ledger == "karbon_billing":
				b.WriteString("\t\t\t" + w.block(f, "ledger", "karbon") + "\n")
			default:
				b.WriteString("\t\t\t" + w.block(f, "ledger", f.p.ledger) + "\n")
			}
			b.WriteString("\t\t\t" + w.block(f, "documents", f.p.documents) + "\n")
		}
		b.WriteString("\t\t}\n")
	}
	b.WriteString(`	}
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
`)
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// xeroTenant is the firm's own Xero organisation, which its Xero ledger
// and Xero Practice Manager share (and so their allowance); every
// organisation the doubles hold reads the same seeded records.
func xeroTenant(f *recordFirm) string {
	return fmt.Sprintf("0e000000-0000-4000-8000-%012x", crc32.ChecksumIEEE([]byte(f.id)))
}

// xeroTenantName is the name the consent lists the organisation by.
func xeroTenantName(f *recordFirm) string { return "Organisation of " + f.id }

// karbonKey is the firm's own Karbon access key: each practice is its
// own Karbon account, with its own allowance.
func karbonKey(f *recordFirm) string { return "access-key-" + f.id }

// connectSystem connects one role of the firm through /v1/connections,
// as its administrator does: Karbon by its access key, the others through
// the double's consent page in a browser, choosing the Clients site where
// the grant reaches several.
func (w *recordWorld) connectSystem(t *testing.T, g *gateway, f *recordFirm, admin, role, system string) {
	t.Helper()
	body := map[string]any{"role": role, "system": system}
	if system == "karbon" {
		body["access_key"] = karbonKey(f)
	}
	r := g.do(t, "POST", "/v1/connections", admin, body)
	if r.StatusCode != 201 {
		t.Errorf("%s: connecting %s as %s: %d %s", f, system, role, r.StatusCode, r.body)
		return
	}
	c := r.json(t)
	id, _ := c["id"].(string)
	if c["status"] != "connected" {
		link, _ := c["authorize_url"].(string)
		br := newConsentBrowser(t)
		redirect, err := w.identity(system).Allow(br.start(t, link))
		if err != nil {
			t.Errorf("%s: the %s consent: %v", f, system, err)
			return
		}
		if r := br.callback(t, g, redirect); r.StatusCode != 200 {
			t.Errorf("%s: the %s callback: %d %s", f, system, r.StatusCode, r.body)
			return
		}
	}
	eventually.NoError(t, 20*time.Second, poll, fmt.Sprintf("%s: %s connected as %s", f, system, role), func() error {
		c := g.do(t, "GET", "/v1/connections/"+id, admin, nil).json(t)
		switch c["status"] {
		case "connected":
			return nil
		case "choose_tenant":
			choices, _ := c["choices"].([]any)
			pick := ""
			for _, ch := range choices {
				ch := ch.(map[string]any)
				if ch["name"] == "Clients" || ch["name"] == xeroTenantName(f) {
					pick, _ = ch["id"].(string)
				}
			}
			if r := g.do(t, "PATCH", "/v1/connections/"+id, admin, map[string]any{"tenant_id": pick}); r.StatusCode != 200 {
				return fmt.Errorf("choosing %s: %d %s", pick, r.StatusCode, r.body)
			}
			return fmt.Errorf("chose %s", pick)
		}
		return fmt.Errorf("%v: %v", c["status"], c["reason"])
	})
}

// connectFirmSystems connects the firm's three systems.
func (w *recordWorld) connectFirmSystems(t *testing.T, g *gateway, f *recordFirm) {
	t.Helper()
	admin := g.issue(f.id, false, "admin").Token
	w.connectSystem(t, g, f, admin, "records", f.p.records)
	switch {
	case f.p.ledger == "karbon_billing":
		// Karbon's billing, with the same key when Karbon is the records too.
		w.connectSystem(t, g, f, admin, "ledger", "karbon")
	default:
		w.connectSystem(t, g, f, admin, "ledger", f.p.ledger)
	}
	w.connectSystem(t, g, f, admin, "documents", f.p.documents)
}

// recordSchema is what the OpenAPI document says of the records: each
// collection's id prefix and record schema, and which fields name
// another record.
type recordSchema struct {
	doc         map[string]any
	collections []string                  // those whose reads carry Data-State
	prefix      map[string]string         // collection -> id prefix ("cli_")
	schema      map[string]map[string]any // collection -> the single record's schema
	// refs are the fields that name another record, by collection: field
	// -> the prefix of the record it names.
	refs map[string]map[string]string
}

// readRecordSchema reads the gateway's OpenAPI document: the collections
// are the paths /v1/<collection>/{id} whose reads answer Data-State, their
// prefixes the pattern of {id}; a reference is a field whose schema (or
// items') has such a pattern, or a field named as a list filter typed as
// a record's id, or one the contract names (engagement, letter_document,
// signed_document, released_jobs).
func readRecordSchema(t *testing.T, g *gateway) *recordSchema {
	t.Helper()
	r := g.do(t, "GET", "/v1/openapi.json", "", nil)
	var doc map[string]any
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	s := &recordSchema{doc: doc, prefix: map[string]string{}, schema: map[string]map[string]any{}, refs: map[string]map[string]string{}}
	paths := doc["paths"].(map[string]any)
	single := regexp.MustCompile(`^/v1/([a-z_]+)/\{id\}$`)
	for p, item := range paths {
		m := single.FindStringSubmatch(p)
		get, _ := item.(map[string]any)["get"].(map[string]any)
		if m == nil || get == nil {
			continue
		}
		ok, _ := dig(get, "responses", "200", "headers", "Data-State").(map[string]any)
		if ok == nil {
			continue
		}
		params, _ := get["parameters"].([]any)
		for _, prm := range params {
			prm := prm.(map[string]any)
			if prm["name"] == "id" && prm["in"] == "path" {
				pat, _ := dig(prm, "schema", "pattern").(string)
				s.prefix[m[1]] = strings.TrimPrefix(pat, "^")
			}
		}
		s.schema[m[1]] = s.resolve(dig(get, "responses", "200", "content", "application/json", "schema"))
		s.collections = append(s.collections, m[1])
	}
	sort.Strings(s.collections)
	byPrefix := map[string]bool{}
	for _, p := range s.prefix {
		byPrefix[p] = true
	}
	// List filters typed as a record's id, by name (owner -> usr_).
	filters := map[string]string{}
	for p, item := range paths {
		if !strings.HasPrefix(p, "/v1/") || strings.Contains(p, "{") {
			continue
		}
		get, _ := item.(map[string]any)["get"].(map[string]any)
		if get == nil {
			continue
		}
		params, _ := get["parameters"].([]any)
		for _, prm := range params {
			prm := prm.(map[string]any)
			pat, _ := dig(prm, "schema", "pattern").(string)
			if name, _ := prm["name"].(string); byPrefix[strings.TrimPrefix(pat, "^")] {
				filters[name] = strings.TrimPrefix(pat, "^")
			}
		}
	}
	named := map[string]string{"client": s.prefix["clients"], "owner": s.prefix["people"], "engagement": s.prefix["engagements"],
		"letter_document": s.prefix["documents"], "signed_document": s.prefix["documents"], "released_jobs": s.prefix["jobs"]}
	for _, coll := range s.collections {
		refs := map[string]string{}
		for field, prop := range s.properties(s.schema[coll]) {
			if field == "id" {
				continue
			}
			prop := s.resolve(prop)
			for _, pat := range []any{prop["pattern"], dig(prop, "items", "pattern")} {
				if pat, _ := pat.(string); byPrefix[strings.TrimPrefix(pat, "^")] {
					refs[field] = strings.TrimPrefix(pat, "^")
				}
			}
			if p, ok := filters[field]; ok {
				refs[field] = p
			}
			if p, ok := named[field]; ok && p != "" {
				refs[field] = p
			}
		}
		s.refs[coll] = refs
	}
	if len(s.collections) < 6 {
		t.Fatalf("the OpenAPI document names %v as record collections", s.collections)
	}
	return s
}

// resolve follows a $ref to its schema; a oneOf of one schema and null is
// that schema.
func (s *recordSchema) resolve(v any) map[string]any {
	m, _ := v.(map[string]any)
	for range 10 {
		if ref, ok := m["$ref"].(string); ok {
			m, _ = dig(s.doc, "components", "schemas", strings.TrimPrefix(ref, "#/components/schemas/")).(map[string]any)
			continue
		}
		if one, ok := m["oneOf"].([]any); ok {
			var rest []any
			for _, o := range one {
				if dig(o, "type") != "null" {
					rest = append(rest, o)
				}
			}
			if len(rest) == 1 {
				m, _ = rest[0].(map[string]any)
				continue
			}
		}
		break
	}
	return m
}

// properties are an object schema's properties, those of each of its
// alternatives merged (a record or its tombstone).
func (s *recordSchema) properties(schema map[string]any) map[string]any {
	out := map[string]any{}
	if props, ok := schema["properties"].(map[string]any); ok {
		for k, v := range props {
			out[k] = v
		}
	}
	for _, key := range []string{"oneOf", "anyOf", "allOf"} {
		alts, _ := schema[key].([]any)
		for _, a := range alts {
			for k, v := range s.properties(s.resolve(a)) {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return out
}

// nullable reports whether a property's schema allows null.
func nullable(prop any) bool {
	m, _ := prop.(map[string]any)
	switch ty := m["type"].(type) {
	case []any:
		return slices.Contains(ty, "null")
	case string:
		return ty == "null"
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		alts, _ := m[key].([]any)
		for _, a := range alts {
			if dig(a, "type") == "null" {
				return true
			}
		}
	}
	return false
}

// reported are the failures told already, each told once.
var reported sync.Map

// recordCheck reports failures of one firm's records.
type recordCheck struct {
	t      *testing.T
	g      *gateway
	f      *recordFirm
	s      *recordSchema
	mu     sync.Mutex
	status map[string]int // GET path -> status, for references
	// madeBefore is when the doubles' records were all made; zero once
	// the test changes them.
	madeBefore time.Time
}

func (c *recordCheck) fail(coll, id, field, format string, args ...any) {
	c.t.Helper()
	msg := fmt.Sprintf("%s %s %s %s %s", c.f.id, coll, id, field, fmt.Sprintf(format, args...))
	if _, seen := reported.LoadOrStore(c.t.Name()+" "+msg, true); seen {
		return
	}
	c.t.Errorf("%s [%s] %s %s %s: %s", c.f, c.f.systemOf(coll), coll, id, field, fmt.Sprintf(format, args...))
}

// body checks what every answer of a record must hold: no zero time, no
// escaped <, > or &, and no empty string where the document allows null.
func (c *recordCheck) body(coll, id string, raw []byte, record map[string]any) {
	c.t.Helper()
	for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
		if i := bytes.Index(bytes.ToLower(raw), []byte(esc)); i >= 0 {
			c.fail(coll, id, "(body)", "holds the escape %s: …%s…", esc, raw[max(0, i-40):min(len(raw), i+40)])
		}
	}
	if i := bytes.Index(raw, []byte(`"0001-01-01`)); i >= 0 {
		c.fail(coll, id, "(body)", "holds a zero time: …%s…", raw[max(0, i-40):min(len(raw), i+40)])
	}
	c.nullables(coll, id, "", c.s.schema[coll], record)
	// Every record the doubles hold was made before the gateway started:
	// a later created_at is a time the gateway made up (its sync's).
	if created, err := time.Parse(time.RFC3339Nano, fmt.Sprint(record["created_at"])); err == nil && !c.madeBefore.IsZero() &&
		created.After(c.madeBefore) {
		c.fail(coll, id, "created_at", "%s, after every record of the doubles was made (%s): not the vendor's",
			record["created_at"], c.madeBefore.Format(time.RFC3339))
	}
}

// events checks the bodies of every event the firm's endpoint received:
// no zero time, no escaped <, > or &.
func (c *recordCheck) events() {
	c.t.Helper()
	c.f.rc.mu.Lock()
	got := slices.Clone(c.f.rc.got)
	c.f.rc.mu.Unlock()
	for _, d := range got {
		what := fmt.Sprintf("event %v %v", d.envelope["event"], d.envelope["id"])
		for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
			if i := bytes.Index(bytes.ToLower(d.body), []byte(esc)); i >= 0 {
				c.fail("events", what, "(body)", "holds the escape %s: …%s…", esc, d.body[max(0, i-40):min(len(d.body), i+40)])
			}
		}
		if i := bytes.Index(d.body, []byte(`"0001-01-01`)); i >= 0 {
			c.fail("events", what, "(body)", "holds a zero time: …%s…", d.body[max(0, i-40):min(len(d.body), i+40)])
		}
	}
}

// nullables walks a value against its schema, reporting "" in a field
// the schema allows null.
func (c *recordCheck) nullables(coll, id, at string, schema map[string]any, v any) {
	c.t.Helper()
	switch v := v.(type) {
	case map[string]any:
		props := c.s.properties(schema)
		for k, val := range v {
			prop := props[k]
			if val == "" && nullable(prop) {
				c.fail(coll, id, at+k, `is "" where the OpenAPI document allows null`)
			}
			c.nullables(coll, id, at+k+".", c.s.resolve(prop), val)
		}
	case []any:
		items := c.s.resolve(schema["items"])
		for i, val := range v {
			c.nullables(coll, id, fmt.Sprintf("%s[%d].", strings.TrimSuffix(at, "."), i), items, val)
		}
	}
}

// collectionOf is the collection whose ids begin with prefix.
func (c *recordCheck) collectionOf(id string) string {
	for coll, p := range c.s.prefix {
		if p != "" && strings.HasPrefix(id, p) {
			return coll
		}
	}
	return ""
}

// resolves checks every reference a record names: the fields the
// document types as ids, and any other string field holding a record's
// id, are null or answer 200 to GET /v1/<collection>/<id>.
func (c *recordCheck) resolves(coll string, record map[string]any) {
	c.t.Helper()
	id, _ := record["id"].(string)
	refs := c.s.refs[coll]
	for field, val := range record {
		if field == "id" {
			continue
		}
		want, declared := refs[field]
		var ids []any
		switch v := val.(type) {
		case nil:
			continue
		case string:
			if !declared && c.collectionOf(v) == "" {
				continue
			}
			ids = []any{v}
		case []any:
			ids = v
		default:
			continue
		}
		for _, ref := range ids {
			ref, ok := ref.(string)
			if !ok {
				if declared {
					c.fail(coll, id, field, "names %v, not an id", ref)
				}
				continue
			}
			target := c.collectionOf(ref)
			if !declared && target == "" {
				continue
			}
			switch {
			case ref == "":
				c.fail(coll, id, field, `is "", neither null nor a record's id`)
			case declared && want != "" && !strings.HasPrefix(ref, want):
				c.fail(coll, id, field, "names %q, not a %s… id", ref, want)
			default:
				if st := c.get("/v1/" + target + "/" + url.PathEscape(ref)); st != 200 {
					c.fail(coll, id, field, "names %s, which GET /v1/%s/%s answers %d", ref, target, ref, st)
				}
			}
		}
	}
}

// get is the status of a read, each path read once.
func (c *recordCheck) get(path string) int {
	c.mu.Lock()
	st, ok := c.status[path]
	c.mu.Unlock()
	if ok {
		return st
	}
	r := c.g.do(c.t, "GET", path, c.f.token, nil)
	if r.StatusCode == 200 {
		var rec map[string]any
		if err := json.Unmarshal(r.body, &rec); err == nil {
			coll := strings.Split(strings.TrimPrefix(path, "/v1/"), "/")[0]
			id, _ := rec["id"].(string)
			c.body(coll, id, r.body, rec)
		}
	}
	c.mu.Lock()
	c.status[path] = r.StatusCode
	c.mu.Unlock()
	return r.StatusCode
}

// walk reads a collection through every page, checking each page's body,
// and returns its records; query is added to the first page's.
func (c *recordCheck) walk(coll, query string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	next := "/v1/" + coll + "?limit=7"
	if query != "" {
		next += "&" + query
	}
	for pages := 0; next != ""; pages++ {
		if pages > 200 {
			c.fail(coll, "", "(list)", "paging did not end")
			break
		}
		r := c.g.do(c.t, "GET", next, c.f.token, nil)
		if r.StatusCode != 200 {
			c.fail(coll, "", "(list)", "GET %s answered %d %s", next, r.StatusCode, tail(string(r.body), 300))
			break
		}
		var page struct {
			Data       []json.RawMessage `json:"data"`
			HasMore    bool              `json:"has_more"`
			NextCursor *string           `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			c.fail(coll, "", "(list)", "GET %s: %v", next, err)
			break
		}
		for _, raw := range page.Data {
			var rec map[string]any
			if err := json.Unmarshal(raw, &rec); err != nil {
				c.fail(coll, "", "(list)", "an item is not an object: %s", raw)
				continue
			}
			id, _ := rec["id"].(string)
			c.body(coll, id, raw, rec)
			out = append(out, rec)
		}
		next = ""
		if page.HasMore && page.NextCursor != nil {
			next = "/v1/" + coll + "?limit=7&cursor=" + url.QueryEscape(*page.NextCursor)
		}
	}
	return out
}

// references walks every collection and checks every record's references
// and body; it returns the records by collection.
func (c *recordCheck) references() map[string][]map[string]any {
	c.t.Helper()
	all := map[string][]map[string]any{}
	for _, coll := range c.s.collections {
		all[coll] = c.walk(coll, "")
		for _, rec := range all[coll] {
			c.resolves(coll, rec)
		}
	}
	return all
}

// ambiguous checks that a ledger's or a document store's record for a
// name two records clients share links to neither: the match is not
// certain.
func (c *recordCheck) ambiguous(all map[string][]map[string]any) {
	c.t.Helper()
	twins := map[any]bool{}
	for _, cl := range all["clients"] {
		if cl["name"] == twinClient {
			twins[cl["id"]] = true
		}
	}
	if len(twins) != 2 {
		c.fail("clients", "", "name", "%d clients named %q, want the records system's 2", len(twins), twinClient)
	}
	forTwin := map[string]func(map[string]any) bool{
		"documents": filedUnder(twinClient),
		"invoices": func(rec map[string]any) bool {
			return rec["number"] == "INV-0101" || rec["number"] == "1901" || (c.f.p.records == "xpm" && rec["number"] == "KIN-0002")
		},
	}
	for coll, is := range forTwin {
		for _, rec := range all[coll] {
			if is(rec) && twins[rec["client"]] {
				c.fail(coll, fmt.Sprint(rec["id"]), "client", "names %v, one of the two clients named %q: a match that is not certain links nothing",
					rec["client"], twinClient)
			}
		}
	}
}

// dataState is the Data-State of a collection's first page.
func dataState(t *testing.T, g *gateway, tok, coll string) (string, response) {
	t.Helper()
	r := g.do(t, "GET", "/v1/"+coll+"?limit=1", tok, nil)
	return r.Header.Get("Data-State"), r
}

// waitFirmsLive waits until every collection of every firm answers
// Data-State live on g, reporting those that do not within the bound.
func waitFirmsLive(t *testing.T, g *gateway, firms []*recordFirm, colls []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	pending := map[*recordFirm][]string{}
	for _, f := range firms {
		pending[f] = slices.Clone(colls)
	}
	for len(pending) > 0 {
		for f, cs := range pending {
			var left []string
			for _, coll := range cs {
				if st, _ := dataState(t, g, f.token, coll); st != "live" {
					left = append(left, coll)
				}
			}
			if len(left) == 0 {
				delete(pending, f)
			} else {
				pending[f] = left
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // a poll of the gateway, bounded by the deadline above
	}
	for f, cs := range pending {
		for _, coll := range cs {
			st, r := dataState(t, g, f.token, coll)
			t.Errorf("%s [%s] %s: Data-State %q (%s), not live within %s: %d %s", f, f.systemOf(coll), coll, st,
				r.Header.Get("Data-State-Reason"), within, r.StatusCode, tail(string(r.body), 200))
		}
	}
}

// pollPlans reads how often each firm's sync plans to poll each kind
// (the admin API's poll_seconds; 0 for a kind not polled).
func pollPlans(t *testing.T, g *gateway, firms []*recordFirm) {
	t.Helper()
	for _, f := range firms {
		f.polls = map[string]time.Duration{}
		resp, err := client.Get("http://" + g.admin + "/practicegw/sync/" + f.id)
		if err != nil {
			t.Errorf("%s: the sync's plan: %v", f, err)
			continue
		}
		var view struct {
			Data []struct {
				Kinds []struct {
					Kind        string `json:"kind"`
					PollSeconds int64  `json:"poll_seconds"`
				} `json:"kinds"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&view)
		resp.Body.Close()
		if err != nil {
			t.Errorf("%s: the sync's plan: %v", f, err)
			continue
		}
		for _, sy := range view.Data {
			for _, k := range sy.Kinds {
				f.polls[k.Kind] = max(f.polls[k.Kind], time.Duration(k.PollSeconds)*time.Second)
			}
		}
	}
}

// within is how long the firm's copy of coll may take to see a change or
// an outage: its planned poll and a margin for a loaded machine, at least
// floor. ok is false when the plan polls less often than the test can
// wait (cap), so that a check it bounds cannot be made here.
func (f *recordFirm) within(coll string, floor, cap time.Duration) (time.Duration, bool) {
	d := max(floor, f.polls[coll]+floor/2)
	return min(d, cap), d <= cap
}

// recordChange is a change made in one double, and how to find the
// record it changes in a firm's collection.
type recordChange struct {
	double, coll string
	what         string // for messages
	is           func(rec map[string]any) bool
	event        string // the event it raises, when the catalog has one
	make         func(w *recordWorld, at time.Time) error
}

func named(field, value string) func(map[string]any) bool {
	return func(rec map[string]any) bool { return rec[field] == value }
}

// filedUnder matches a document filed in a client's folder.
func filedUnder(folder string) func(map[string]any) bool {
	return func(rec map[string]any) bool {
		b, _ := json.Marshal(rec["location"])
		return strings.Contains(string(b), "/"+folder+"/") || strings.Contains(string(b), "/"+strings.ToLower(folder)+"/")
	}
}

// filedAs matches the document of that name in a client's folder.
func filedAs(folder, name string) func(map[string]any) bool {
	under := filedUnder(folder)
	return func(rec map[string]any) bool { return under(rec) && strings.EqualFold(fmt.Sprint(rec["name"]), name) }
}

// karbonAPI sends a write to the Karbon double's API, as a Karbon user's
// app would.
func karbonAPI(k *vendortest.Karbon, method, path string, body any) error {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(method, k.URL+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+k.Bearer)
	req.Header.Set("AccessKey", k.AccessKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d", method, path, resp.StatusCode)
	}
	return nil
}

// recordChanges are the changes made in each double: one record of each
// kind it serves.
func recordChanges() []recordChange {
	taxReturn := func(name string) string { return "/Clients/" + name + "/2025/Tax return/Tax return 2025.pdf" }
	return []recordChange{
		{double: "karbon", coll: "clients", what: "contact C007 renamed through Karbon's API", is: named("name", "Hal Client"), event: "client.updated",
			make: func(w *recordWorld, _ time.Time) error {
				return karbonAPI(w.l.Karbon, "PATCH", "/v3/Contacts/C007", map[string]any{"FirstName": "Halcyon"})
			}},
		{double: "karbon", coll: "jobs", what: "work item W0100 completed in Karbon", is: named("title", "Accounts & VAT <2025>"), event: "job.stage_changed",
			make: func(w *recordWorld, _ time.Time) error { w.l.Karbon.MoveWorkItem("W0100", "Completed", ""); return nil }},
		{double: "karbon", coll: "people", what: "user U1 renamed in Karbon", is: named("email", "pat@hollis.example"), event: "person.updated",
			make: func(w *recordWorld, _ time.Time) error {
				w.l.Karbon.AddUser(vendortest.KarbonUser{Id: "U1", Name: "Pat Partner-Hale", EmailAddress: "pat@hollis.example", Roles: []string{"Partner"}})
				return nil
			}},
		{double: "karbon", coll: "invoices", what: "Karbon invoice KIN-0000 paid", is: named("number", "KIN-0000"), event: "invoice.paid",
			make: func(w *recordWorld, at time.Time) error {
				w.l.Karbon.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: "KI000", PaymentMethod: "Bank Transfer", Amount: "600.00", PaymentDate: at})
				return nil
			}},
		{double: "xpm", coll: "clients", what: "XPM client Hal Client's email changed", is: named("name", "Hal Client"), event: "client.updated",
			make: func(w *recordWorld, at time.Time) error {
				w.l.XPM.EditClient("c0000000-0000-0000-0000-000000000007", func(c *vendortest.XPMClient) {
					c.Email, c.Modified = "hal.new@example.com", at
				})
				return nil
			}},
		{double: "xpm", coll: "jobs", what: "XPM job J000100 completed", is: named("title", "Accounts & VAT <2025>"), event: "job.stage_changed",
			make: func(w *recordWorld, _ time.Time) error { w.l.XPM.MoveJob("J000100", "Completed"); return nil }},
		{double: "xpm", coll: "people", what: "XPM staff Pat Partner renamed", is: named("email", "pat@hollis.example"), event: "person.updated",
			make: func(w *recordWorld, _ time.Time) error {
				w.l.XPM.AddStaff(vendortest.XPMStaff{UUID: "57aff000-0000-4000-8000-000000000001", Name: "Pat Partner-Hale", Email: "pat@hollis.example"})
				return nil
			}},
		{double: "xpm", coll: "engagements", what: "XPM quote Q000100 accepted", is: named("scope", "Year-end accounts & tax: Accounts preparation"), event: "engagement.signed",
			make: func(w *recordWorld, at time.Time) error {
				w.l.XPM.AddQuote(vendortest.XPMQuote{ID: "Q000100", Name: "Year-end accounts & tax", Type: "Quote", State: "Accepted",
					ClientUUID: "c0000000-0000-0000-0000-000000000100", Date: w.epoch, Valid: w.epoch.AddDate(0, 1, 0), Amount: "1500.00",
					Tax: "300.00", Tasks: []string{"Accounts preparation"}})
				return nil
			}},
		{double: "xero", coll: "invoices", what: "Xero invoice INV-0000 paid", is: named("number", "INV-0000"), event: "invoice.paid",
			make: func(w *recordWorld, at time.Time) error {
				w.l.Xero.Pay("00000000-0000-0000-0000-000000000000", "GoCardless payout", at)
				return nil
			}},
		{double: "xero", coll: "engagements", what: "Xero quote QU-0100 accepted", is: named("scope", "Year-end accounts & tax: Accounts preparation"), event: "engagement.signed",
			make: func(w *recordWorld, at time.Time) error {
				w.l.Xero.AddQuote(vendortest.XeroQuote{QuoteID: "00000000-0000-0000-0002-000000000001", QuoteNumber: "QU-0100", Title: "Year-end accounts & tax",
					Status: "ACCEPTED", ContactID: "xc-dunmore", ContactName: trickyClient, Date: w.epoch, Expiry: w.epoch.AddDate(0, 1, 0),
					Lines: []string{"Accounts preparation"}, Total: "1800.00", CurrencyCode: "GBP", Updated: at})
				return nil
			}},
		{double: "quickbooks", coll: "invoices", what: "QuickBooks invoice 1000 paid", is: named("number", "1000"), event: "invoice.paid",
			make: func(w *recordWorld, at time.Time) error { w.l.QuickBooks.Pay("100", "Check", "1001", at); return nil }},
		{double: "quickbooks", coll: "engagements", what: "QuickBooks estimate E0300 accepted", is: named("scope", "Bookkeeping"), event: "engagement.signed",
			make: func(w *recordWorld, at time.Time) error {
				w.l.QuickBooks.AddEstimate(vendortest.QBEstimate{ID: "300", DocNumber: "E0300", CustomerID: "90", CustomerName: trickyClient, TxnDate: w.epoch,
					Lines: []string{"Bookkeeping"}, Total: "300.00", Status: "Accepted", AcceptedDate: at, Created: w.epoch, Updated: at})
				return nil
			}},
		{double: "sharepoint", coll: "documents", what: "SharePoint tax return of Ada Client changed", is: filedAs("Ada Client", "Tax return 2025.pdf"), event: "document.updated",
			make: func(w *recordWorld, at time.Time) error {
				w.l.Graph.Touch(w.l.Graph.Lookup(taxReturn("Ada Client")), at)
				return nil
			}},
		{double: "google_drive", coll: "documents", what: "Google Drive tax return of Ada Client changed", is: filedAs("Ada Client", "Tax return 2025.pdf"), event: "document.updated",
			make: func(w *recordWorld, at time.Time) error {
				w.l.GDrive.Touch(w.l.GDrive.Lookup(taxReturn("Ada Client")), at)
				return nil
			}},
		{double: "dropbox", coll: "documents", what: "Dropbox tax return of Ada Client changed", is: filedAs("Ada Client", "Tax return 2025.pdf"), event: "document.updated",
			make: func(w *recordWorld, at time.Time) error {
				w.l.Dropbox.Touch(w.l.Dropbox.Lookup(taxReturn("Ada Client")), at)
				return nil
			}},
	}
}

// catalogEvents are the events the OpenAPI document's webhooks name.
func catalogEvents(s *recordSchema) map[string]bool {
	out := map[string]bool{}
	hooks, _ := s.doc["webhooks"].(map[string]any)
	for name := range hooks {
		out[name] = true
	}
	return out
}

// versionOf reads a record's version as a number.
func versionOf(rec map[string]any) float64 {
	v, _ := rec["version"].(float64)
	return v
}

// changed checks, for each firm a change reaches, that the record's
// version grows, its updated_at is not before the change, it is listed
// by updated_since, and an event of it carries the greater version.
func checkChange(t *testing.T, gws []*gateway, w *recordWorld, s *recordSchema, firms []*recordFirm,
	before map[*recordFirm]map[string][]map[string]any, ch recordChange, within time.Duration) {
	t.Helper()
	type target struct {
		f   *recordFirm
		rec map[string]any
	}
	var targets []target
	for _, f := range firms {
		if f.systemOf(ch.coll) != ch.double {
			continue
		}
		var found []map[string]any
		for _, rec := range before[f][ch.coll] {
			if ch.is(rec) {
				found = append(found, rec)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s [%s] %s: %d records are the one %s changes, want 1", f, ch.double, ch.coll, len(found), ch.what)
			continue
		}
		if _, ok := f.within(ch.coll, within, maxWait); !ok {
			t.Logf("%s [%s] %s: not checked: its plan polls every %s, longer than this test waits", f, ch.double, ch.coll, f.polls[ch.coll])
			continue
		}
		targets = append(targets, target{f, found[0]})
	}
	if len(targets) == 0 {
		return
	}
	at := time.Now().UTC()
	since := at.Add(-time.Second).Format(time.RFC3339)
	if err := ch.make(w, at); err != nil {
		t.Errorf("%s: %v", ch.what, err)
		return
	}
	withEvent := catalogEvents(s)[ch.event]
	var wg sync.WaitGroup
	for _, tg := range targets {
		for _, g := range gws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f, id, v0 := tg.f, tg.rec["id"].(string), versionOf(tg.rec)
				c := &recordCheck{t: t, g: g, f: f, s: s, status: map[string]int{}}
				bound, _ := f.within(ch.coll, within, maxWait)
				deadline := time.Now().Add(bound)
				var problems []string
				for {
					problems = nil
					r := g.do(t, "GET", "/v1/"+ch.coll+"/"+url.PathEscape(id), f.token, nil)
					var now map[string]any
					json.Unmarshal(r.body, &now)
					if r.StatusCode != 200 {
						problems = append(problems, fmt.Sprintf("GET answered %d", r.StatusCode))
					} else {
						if versionOf(now) <= v0 {
							problems = append(problems, fmt.Sprintf("version %s, not greater than %s before the change", number(now["version"]), number(tg.rec["version"])))
						}
						if u, err := time.Parse(time.RFC3339Nano, fmt.Sprint(now["updated_at"])); err != nil || u.Before(at.Truncate(time.Second)) {
							problems = append(problems, fmt.Sprintf("updated_at %v, before the change at %s", now["updated_at"], at.Format(time.RFC3339)))
						}
					}
					if len(problems) == 0 {
						listed := false
						for _, rec := range c.walk(ch.coll, "updated_since="+url.QueryEscape(since)) {
							listed = listed || rec["id"] == id
						}
						if !listed {
							problems = append(problems, "missing from updated_since="+since)
						}
					}
					if len(problems) == 0 && withEvent && g == gws[0] {
						if got := eventVersions(f.rc, id); !slices.ContainsFunc(got, func(v float64) bool { return v > v0 }) {
							problems = append(problems, fmt.Sprintf("no event with data.object.version > %s (events of it carried %s)", number(v0), number(got)))
						}
					}
					if len(problems) == 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(200 * time.Millisecond) // the next look, bounded by the deadline above
				}
				for _, p := range problems {
					c.fail(ch.coll, id, "(change)", "%s on %s, %s after the change (planned poll %s): %s", ch.what, g.addr, bound, f.polls[ch.coll], p)
				}
			}()
		}
	}
	wg.Wait()
}

// number prints a JSON number (or a list of them) as written.
func number(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []float64:
		out := make([]string, len(v))
		for i, f := range v {
			out[i] = number(f)
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	return fmt.Sprint(v)
}

// eventVersions are the data.object.version of the events the receiver
// got of a record.
func eventVersions(rc *receiver, id string) []float64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []float64
	for _, d := range rc.got {
		obj, _ := dig(d.envelope, "data", "object").(map[string]any)
		if obj != nil && obj["id"] == id {
			out = append(out, versionOf(obj))
		}
	}
	return out
}

// checkStopped stops the doubles (every call answered 503) and checks
// that every collection they serve each firm turns away from live within
// the bound, on every gateway; it starts them again before returning.
func checkStopped(t *testing.T, gws []*gateway, w *recordWorld, firms []*recordFirm, doubles []string, within time.Duration) {
	t.Helper()
	for _, d := range doubles {
		w.faults(d).Down(vendortest.Fault{Status: http.StatusServiceUnavailable, Body: `{"message":"down"}`})
	}
	defer func() {
		for _, d := range doubles {
			w.faults(d).Up()
		}
	}()
	var wg sync.WaitGroup
	for _, f := range firms {
		for d, colls := range f.served() {
			if !slices.Contains(doubles, d) {
				continue
			}
			for _, coll := range colls {
				bound, ok := f.within(coll, within, maxWait)
				if !ok {
					t.Logf("%s [%s] %s: outage not checked: its plan polls every %s, longer than this test waits", f, d, coll, f.polls[coll])
					continue
				}
				for _, g := range gws {
					wg.Add(1)
					go func() {
						defer wg.Done()
						deadline := time.Now().Add(bound)
						for {
							st, r := dataState(t, g, f.token, coll)
							if st != "live" && st != "" {
								return
							}
							if time.Now().After(deadline) {
								t.Errorf("%s [%s] %s: Data-State %q (confirmed at %s) on %s %s after %s stopped answering (planned poll %s)", f, d, coll, st,
									r.Header.Get("Data-Confirmed-At"), g.addr, bound, d, f.polls[coll])
								return
							}
							time.Sleep(200 * time.Millisecond) // the next look, bounded by the deadline above
						}
					}()
				}
			}
		}
	}
	wg.Wait()
}

// maxWait is the longest a check waits for a firm's sync: a plan that
// polls less often is noted, not checked.
const maxWait = 45 * time.Second

// forEachFirm runs check for every firm, a few at a time.
func forEachFirm(firms []*recordFirm, check func(f *recordFirm)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, f := range firms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			check(f)
		}()
	}
	wg.Wait()
}

// TestPracticeRecordOnEverySystem is issue 39's test of one practice
// record over the firm's real systems, on bbolt (one gateway) and on
// Redis (two gateways).
func TestPracticeRecordOnEverySystem(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) { practiceRecord(t, nil, allPairings()) })
	t.Run("redis", func(t *testing.T) { practiceRecord(t, redistest.Start(t), allPairings()) })
}

func practiceRecord(t *testing.T, redis *redistest.Server, pairings []pairing) {
	start := time.Now()
	addr := freePort(t)
	public := "http://" + addr
	w := startRecordWorld(t, public)
	seeded := time.Now().UTC()
	var firms []*recordFirm
	for _, connected := range []bool{false, true} {
		for _, p := range pairings {
			mode := "cf"
			if connected {
				mode = "cn"
			}
			firms = append(firms, &recordFirm{id: fmt.Sprintf("frm_%s_%s_%s_%s", mode, shortName[p.records], shortName[p.ledger], shortName[p.documents]),
				p: p, connected: connected})
		}
	}
	for _, f := range firms {
		w.l.Karbon.AddAccessKey(karbonKey(f))
		w.l.Xero.Identity.AddTenant(xeroTenant(f), xeroTenantName(f))
	}
	config := w.caddyfile(t, public, firms)
	env := []string{"PRACTICEGW_SYNC_POLL=1s"}
	if redis != nil {
		env = append(env, "PRACTICEGW_REDIS="+redis.URL(), "PRACTICEGW_SECRETS_KEY="+secretsKey())
	}
	gws := []*gateway{startGateway(t, gatewayOptions{config: config, addr: addr, env: env})}
	if redis != nil {
		gws = append(gws, startGateway(t, gatewayOptions{config: config, env: env}))
	}
	a := gws[0]
	forEachFirm(firms, func(f *recordFirm) {
		f.token = a.issue(f.id, false, append([]string{"admin"}, allReadWrite...)...).Token
		f.rc = newReceiver(t)
		_, secret := register(t, a, f.token, f.rc.url(), "*")
		f.rc.setSecrets(secret)
		if f.connected {
			w.connectFirmSystems(t, a, f)
		}
	})
	t.Logf("%d firms configured and connected in %s", len(firms), time.Since(start).Round(time.Millisecond))
	s := readRecordSchema(t, a)
	for _, g := range gws {
		waitFirmsLive(t, g, firms, s.collections, 60*time.Second)
	}
	t.Logf("live in %s", time.Since(start).Round(time.Millisecond))
	pollPlans(t, a, firms)

	// Every reference of every record resolves, on every gateway, and no
	// body holds what the contract forbids.
	before := map[*recordFirm]map[string][]map[string]any{}
	var mu sync.Mutex
	for _, g := range gws {
		forEachFirm(firms, func(f *recordFirm) {
			c := &recordCheck{t: t, g: g, f: f, s: s, status: map[string]int{}, madeBefore: seeded}
			all := c.references()
			c.ambiguous(all)
			if g == a {
				mu.Lock()
				before[f] = all
				mu.Unlock()
			}
		})
	}
	t.Logf("references checked in %s", time.Since(start).Round(time.Millisecond))

	// A change in each double moves its record in every firm it serves.
	var wg sync.WaitGroup
	for _, ch := range recordChanges() {
		wg.Add(1)
		go func() { defer wg.Done(); checkChange(t, gws, w, s, firms, before, ch, 20*time.Second) }()
	}
	wg.Wait()
	t.Logf("changes checked in %s", time.Since(start).Round(time.Millisecond))
	forEachFirm(firms, func(f *recordFirm) { (&recordCheck{t: t, g: a, f: f, s: s}).events() })

	// A stopped double turns every kind it serves away from live: the
	// records systems, then the ledgers, then the document stores.
	for _, round := range [][]string{{"karbon", "xpm"}, {"xero", "quickbooks"}, {"sharepoint", "google_drive", "dropbox"}} {
		checkStopped(t, gws, w, firms, round, 20*time.Second)
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}
