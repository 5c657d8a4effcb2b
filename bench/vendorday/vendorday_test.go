// Package vendorday is the benchmark "a day of vendor calls" (issue #23):
// the read model's syncs with the default configuration run for 24 hours
// of a fake clock (testing/synctest) over the vendor doubles, for a small
// and a large firm on Karbon + Xero + SharePoint, on Karbon with its
// billing as the ledger + SharePoint, and on Xero Practice Manager +
// SharePoint (the Xero and XPM firms with their quotes as engagements),
// and print the calls each vendor received against
// its published daily and per-minute limits. Targets: at most 50% of
// each daily allowance, no minute over its limit.
//
// It takes minutes, so it runs only when asked: bench/vendorday.sh (with
// -short, the small firms alone).
package vendorday

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// size is how much a firm keeps in its systems.
type size struct {
	name                                              string
	clients, jobs, invoices, documents, staff, quotes int
}

var sizes = []size{
	{"small", 200, 1000, 600, 100, 8, 150},
	{"large", 2000, 10000, 5000, 1000, 30, 1500},
}

// limit is a vendor's published limits: calls a minute and a day (a day
// of the minute's rate when it publishes none).
type limit struct{ minute, day int }

var published = map[string]limit{
	"Karbon":     {120, 120 * 24 * 60},
	"Xero":       {60, 5000},
	"SharePoint": {600, 600 * 24 * 60},
}

// calls counts each vendor's calls by the minute of the fake clock.
type calls struct {
	mu       sync.Mutex
	start    time.Time
	byVendor map[string]map[int64]int
}

func (c *calls) add(vendor string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.byVendor[vendor]
	if m == nil {
		m = map[int64]int{}
		c.byVendor[vendor] = m
	}
	m[int64(time.Since(c.start)/time.Minute)]++
}

// system is one of a firm's systems as the gateway opens it; engagements
// says it keeps the firm's proposals (firmsystem.Opened.Engagements).
type system struct {
	role        string
	reader      practice.Reader
	client      *upstream.Client
	engagements bool
}

// syncs builds the firm's syncs as the gateway does, with the default
// configuration: engagements synced by the system that keeps them.
func syncs(t *testing.T, firm string, systems []system) []*readmodel.Syncer {
	return syncsRecording(t, firm, systems, &changes.Recorder{})
}

// syncsRecording is syncs with the firm's recorder, which the systems'
// webhooks share, compared with the model syncs makes.
func syncsRecording(t *testing.T, firm string, systems []system, rec *changes.Recorder) []*readmodel.Syncer {
	st := readmodelsim.NewStore(nil)
	model := readmodel.New(readmodel.Config{Firm: firm, Store: st})
	rec.State = model
	keeps := map[string]bool{}
	for _, s := range systems {
		keeps[s.role] = keeps[s.role] || s.engagements
	}
	engagements, err := firmsystem.EngagementsRole("", keeps)
	if err != nil {
		t.Fatal(err)
	}
	var out []*readmodel.Syncer
	for _, s := range systems {
		kinds := firmsystem.KindsOf(s.role, engagements)
		for _, k := range kinds {
			model.Serve(k, s.reader)
		}
		budget := readmodel.SyncBudget{Account: s.client.BudgetAccount()}
		for _, a := range s.client.Allowances() {
			budget.Allowances = append(budget.Allowances, readmodel.Allowance{Limit: a.Limit, Per: a.Per})
		}
		sy := readmodel.NewSyncer(readmodel.SyncedSystem{Role: s.role, Kinds: kinds, Reader: s.reader},
			readmodel.SyncDeps{Model: model, Recorder: rec, Sink: discard{}, Checkpoints: st, Leases: st, Holder: "bench"},
			readmodel.SyncConfig{}, readmodel.WithVendorCalls(s.client.Sent, 0), readmodel.WithBudget(budget))
		out = append(out, sy)
	}
	readmodel.ShareBudgets(out)
	return out
}

type discard struct{}

func (discard) Publish(context.Context, practice.Change) error { return nil }

// firm is a firm's doubles, filled, and how to open its systems on them.
type firm struct {
	name  string
	hosts map[string]string // double's host -> vendor
	serve vendortest.Serve
	open  func(deps upstream.Deps) ([]system, error)
}

// epoch is when the doubles' records were last changed: before the
// bubble's clock starts (2000-01-01), so that a poll finds what changed
// since, as in a firm's ordinary day.
var epoch = time.Date(1999, 12, 1, 9, 0, 0, 0, time.UTC)

func host(u string) string {
	u = strings.TrimPrefix(u, "http://")
	h, _, _ := strings.Cut(u, "/")
	return h
}

func sharepointDrive(s size, clientName func(int) string) *vendortest.Graph {
	g := vendortest.NewGraph()
	folders := max(1, min(s.clients, s.documents/4))
	for i := range s.documents {
		g.AddFile(fmt.Sprintf("/Clients/%s/2025/Tax return/Tax return 2025 %d.pdf", clientName(i%folders), i), 120_000, "application/pdf", epoch)
	}
	return g
}

func openSharePoint(g *vendortest.Graph, deps upstream.Deps) (system, error) {
	a, err := sharepoint.New(sharepoint.Config{Firm: "frm_bench", DriveID: g.DriveID, Root: "/Clients", BaseURL: g.URL,
		OAuth2: upstream.OAuth2Config{AccessToken: g.Token}}, deps)
	if err != nil {
		return system{}, err
	}
	return system{"documents", a, a.Upstream(), false}, nil
}

// fillKarbon fills a Karbon double with a firm's staff, clients and work
// items.
func fillKarbon(k *vendortest.Karbon, s size) {
	for i := range s.staff {
		k.AddUser(vendortest.KarbonUser{Id: fmt.Sprintf("U%03d", i), Name: fmt.Sprintf("Staff %d", i),
			EmailAddress: fmt.Sprintf("staff%d@firm.example", i), Roles: []string{"Manager"}})
	}
	for i := range s.clients {
		k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%05d", i), FirstName: "Client", LastName: fmt.Sprintf("%05d", i),
			ContactType: "Client", Email: fmt.Sprintf("c%d@example.com", i), Country: "GB", OwnerKey: fmt.Sprintf("U%03d", i%s.staff),
			LastModified: epoch})
	}
	for i := range s.jobs {
		deadline := epoch.AddDate(0, 0, i%365).Format(time.RFC3339)
		k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%06d", i), Title: fmt.Sprintf("Accounts %d", i),
			AssigneeKey: fmt.Sprintf("U%03d", i%s.staff), ClientKey: fmt.Sprintf("C%05d", i%s.clients), ClientType: "Contact",
			StartDate: epoch.Format(time.RFC3339), DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: "Planned"})
	}
}

// karbonXero is a firm on Karbon, Xero and SharePoint.
func karbonXero(t *testing.T, s size) firm {
	k, x := vendortest.NewKarbon(), vendortest.NewXero()
	name := func(i int) string { return fmt.Sprintf("Client %05d", i) }
	g := sharepointDrive(s, name)
	t.Cleanup(func() { k.Close(); x.Close(); g.Close() })
	fillKarbon(k, s)
	for i := range s.invoices {
		x.AddInvoice(vendortest.XeroInvoice{InvoiceID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), InvoiceNumber: fmt.Sprintf("INV-%05d", i),
			Status: "AUTHORISED", ContactID: fmt.Sprintf("xc-%d", i%s.clients), ContactName: name(i % s.clients),
			Date: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "1200.00", AmountDue: "1200.00", CurrencyCode: "GBP", Updated: epoch})
	}
	for i := range s.quotes {
		x.AddQuote(vendortest.XeroQuote{QuoteID: fmt.Sprintf("b1e2d3c4-0000-4000-8000-%012d", i), QuoteNumber: fmt.Sprintf("QU-%05d", i),
			Title: "Annual accounts", Status: []string{"DRAFT", "SENT", "ACCEPTED", "INVOICED"}[i%4], ContactID: fmt.Sprintf("xc-%d", i%s.clients),
			ContactName: name(i % s.clients), Date: epoch, Expiry: epoch.AddDate(0, 1, 0), Lines: []string{"Statutory accounts", "Tax return"},
			Total: "2450.00", CurrencyCode: "GBP", Updated: epoch})
	}
	f := firm{name: "Karbon + Xero + SharePoint, " + s.name,
		hosts: map[string]string{host(k.URL): "Karbon", host(x.URL): "Xero", host(g.URL): "SharePoint"}}
	f.serve.Hosts = map[string]http.Handler{host(k.URL): k.Handler(), host(x.URL): x.Handler(), host(g.URL): g.Handler()}
	f.open = func(deps upstream.Deps) ([]system, error) {
		ka, err := karbon.New(karbon.Config{Firm: "frm_bench", AccessKey: k.AccessKey, Bearer: k.Bearer, BaseURL: k.URL,
			WebhookSigningKey: "bench-signing-key-0001"}, deps)
		if err != nil {
			return nil, err
		}
		xa, err := xero.New(xero.Config{Firm: "frm_bench", TenantID: x.TenantID, BaseURL: x.URL,
			OAuth2: upstream.OAuth2Config{AccessToken: x.Token}}, deps)
		if err != nil {
			return nil, err
		}
		sp, err := openSharePoint(g, deps)
		return []system{{"records", ka, ka.Upstream(), false}, {"ledger", xa, xa.Upstream(), true}, sp}, err
	}
	return f
}

// karbonBilling is a firm on Karbon (records, and its billing as the
// ledger) and SharePoint: a fifth of its invoices paid, half of those by
// card through Karbon Payments, the rest by check.
func karbonBilling(t *testing.T, s size) firm {
	k := vendortest.NewKarbon()
	name := func(i int) string { return fmt.Sprintf("Client %05d", i) }
	g := sharepointDrive(s, name)
	t.Cleanup(func() { k.Close(); g.Close() })
	fillKarbon(k, s)
	k.SetNow(func() time.Time { return epoch })
	for i := range s.invoices {
		key := fmt.Sprintf("I%06d", i)
		k.AddInvoice(vendortest.KarbonInvoice{InvoiceKey: key, InvoiceNumber: fmt.Sprintf("KIN-%06d", i),
			ClientKey: fmt.Sprintf("C%05d", i%s.clients), ClientType: "Contact", ClientName: name(i % s.clients),
			Total: "1200.00", Tax: "200.00", CurrencyCode: "GBP", Status: "AwaitingPayment",
			InvoiceDate: epoch.AddDate(0, 0, -20), DueDate: epoch.AddDate(0, 0, 10), CreatedAt: epoch, UpdatedAt: epoch})
		switch i % 10 {
		case 0:
			k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: key, PaymentType: "Payment", PaymentMethod: "Card",
				CardType: "Visa", CardFunding: "credit", Amount: "1200.00", PaymentDate: epoch})
		case 1:
			k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: key, PaymentMethod: "Check", Amount: "1200.00", PaymentDate: epoch})
		}
	}
	k.SetNow(func() time.Time { return time.Now().UTC().Truncate(time.Second) })
	f := firm{name: "Karbon with its billing + SharePoint, " + s.name,
		hosts: map[string]string{host(k.URL): "Karbon", host(g.URL): "SharePoint"}}
	f.serve.Hosts = map[string]http.Handler{host(k.URL): k.Handler(), host(g.URL): g.Handler()}
	f.open = func(deps upstream.Deps) ([]system, error) {
		// As the gateway opens records karbon for a firm that names no
		// ledger: one adapter, synced as records and as the ledger.
		ka, err := karbon.New(karbon.Config{Firm: "frm_bench", AccessKey: k.AccessKey, Bearer: k.Bearer, BaseURL: k.URL,
			WebhookSigningKey: "bench-signing-key-0001"}, deps, karbon.AsLedger())
		if err != nil {
			return nil, err
		}
		sp, err := openSharePoint(g, deps)
		return []system{{"records", ka, ka.Upstream(), false}, {"ledger", ka, ka.Upstream(), false}, sp}, err
	}
	return f
}

// onXPM is a firm on Xero Practice Manager (records and ledger) and
// SharePoint.
func onXPM(t *testing.T, s size) firm {
	x := vendortest.NewXPM()
	name := func(i int) string { return fmt.Sprintf("Client %05d", i) }
	g := sharepointDrive(s, name)
	t.Cleanup(func() { x.Close(); g.Close() })
	staff := func(i int) string { return fmt.Sprintf("57aff000-0000-4000-8000-%012d", i) }
	client := func(i int) string { return fmt.Sprintf("c11e0000-0000-4000-8000-%012d", i) }
	for i := range s.staff {
		x.AddStaff(vendortest.XPMStaff{UUID: staff(i), Name: fmt.Sprintf("Staff %d", i), Email: fmt.Sprintf("staff%d@firm.example", i)})
	}
	for i := range s.clients {
		x.AddClient(vendortest.XPMClient{UUID: client(i), Name: name(i), Email: fmt.Sprintf("c%d@example.com", i),
			Country: "United Kingdom", BusinessStructure: "Limited Company", AccountManager: staff(i % s.staff)})
	}
	for i := range s.jobs {
		x.AddJob(vendortest.XPMJob{ID: fmt.Sprintf("J%06d", i), UUID: fmt.Sprintf("10b00000-0000-4000-8000-%012d", i),
			Name: fmt.Sprintf("Accounts %d", i), ClientUUID: client(i % s.clients), Type: "Accounts", State: "Planned",
			Start: epoch.AddDate(0, -1, 0), Due: epoch.AddDate(0, 2, 0), Created: epoch.AddDate(0, -1, 0), Manager: staff(i % s.staff)})
	}
	for i := range s.invoices {
		x.AddInvoice(vendortest.XPMInvoice{ID: fmt.Sprintf("I%06d", i), UUID: fmt.Sprintf("1a000000-0000-4000-8000-%012d", i),
			Status: "Approved", ClientUUID: client(i % s.clients), JobID: fmt.Sprintf("J%06d", i%s.jobs), Date: epoch.AddDate(0, 0, -20),
			Due: epoch.AddDate(0, 0, 10), Total: "1200.50", Paid: "0.00", Outstanding: "1200.50"})
	}
	for i := range s.quotes {
		x.AddQuote(vendortest.XPMQuote{ID: fmt.Sprintf("Q%06d", i), Name: fmt.Sprintf("Year-end accounts %d", i),
			State: []string{"Draft", "Issued", "Accepted", "Declined"}[i%4], ClientUUID: client(i % s.clients),
			Date: epoch.AddDate(0, 0, -20), Amount: "1500.00", Tax: "300.00", Tasks: []string{"Accounts preparation", "Tax return"}})
	}
	f := firm{name: "Xero Practice Manager + SharePoint, " + s.name,
		hosts: map[string]string{host(x.URL): "Xero", host(g.URL): "SharePoint"}}
	f.serve.Hosts = map[string]http.Handler{host(x.URL): x.Handler(), host(g.URL): g.Handler()}
	f.open = func(deps upstream.Deps) ([]system, error) {
		xa, err := xpm.New(xpm.Config{Firm: "frm_bench", TenantID: x.TenantID, BaseURL: x.URL,
			OAuth2: upstream.OAuth2Config{AccessToken: x.Token}}, deps)
		if err != nil {
			return nil, err
		}
		sp, err := openSharePoint(g, deps)
		// XPM's own invoices as the ledger: its quotes are the records
		// system's.
		return []system{{"records", xa, xa.Upstream(), true}, {"ledger", xa, xa.Upstream(), false}, sp}, err
	}
	return f
}

// day runs f's syncs for 24 hours of the bubble's clock and returns the
// calls each vendor received by the minute, and each sync's plan at the
// end of the day ("records: polls clients every 1m, ...").
func day(t *testing.T, f firm) (*calls, []string) {
	var c *calls
	var plans []string
	synctest.Test(t, func(t *testing.T) {
		c = &calls{start: time.Now(), byVendor: map[string]map[int64]int{}}
		serve := f.serve
		serve.Observe = func(h string, _ *http.Request) { c.add(f.hosts[h]) }
		// One budget for the firm, as the gateway shares one.
		deps := upstream.Deps{Budget: upstream.NewLocalBudget(nil), Clock: upstream.SystemClock{}}
		deps.Transport = serve
		systems, err := f.open(deps)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		all := syncs(t, "frm_bench", systems)
		for _, s := range all {
			wg.Go(func() { s.Run(ctx) })
		}
		time.Sleep(24 * time.Hour)
		for i, s := range all {
			plans = append(plans, fmt.Sprintf("%s (%s): %s", systems[i].role, strings.Join(kindsOf(s), ", "), s.Status().Plan))
		}
		cancel()
		wg.Wait()
	})
	return c, plans
}

// kindsOf are the kinds s syncs.
func kindsOf(s *readmodel.Syncer) []string {
	var out []string
	for _, k := range s.Status().Kinds {
		out = append(out, string(k.Kind))
	}
	return out
}

func TestADayOfVendorCalls(t *testing.T) {
	if os.Getenv("PRACTICEGW_BENCH_VENDORDAY") == "" {
		t.Skip("a benchmark of minutes: bench/vendorday.sh runs it")
	}
	fmt.Printf("%-44s %-11s %9s %9s %6s %10s %8s\n", "firm", "vendor", "calls/day", "allowed", "share", "peak/min", "limit")
	if testing.Short() {
		sizes = sizes[:1]
	}
	if os.Getenv("PRACTICEGW_BENCH_VENDORDAY") == "large" {
		sizes = sizes[1:]
	}
	for _, s := range sizes {
		for _, f := range []firm{karbonXero(t, s), karbonBilling(t, s), onXPM(t, s)} {
			c, plans := day(t, f)
			vendors := make([]string, 0, len(c.byVendor))
			for v := range c.byVendor {
				vendors = append(vendors, v)
			}
			sort.Strings(vendors)
			for _, v := range vendors {
				total, peak := 0, 0
				for _, n := range c.byVendor[v] {
					total += n
					peak = max(peak, n)
				}
				l := published[v]
				share := float64(total) / float64(l.day)
				fmt.Printf("%-44s %-11s %9d %9d %5.1f%% %10d %8d\n", f.name, v, total, l.day, 100*share, peak, l.minute)
				if share > 0.5 {
					t.Errorf("%s: %s received %d calls in a day, over half of its %d", f.name, v, total, l.day)
				}
				if peak > l.minute {
					t.Errorf("%s: %s received %d calls in one minute, over its %d", f.name, v, peak, l.minute)
				}
			}
			for _, p := range plans {
				fmt.Printf("    %s\n", p)
			}
		}
	}
}
