package karbon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// otherRecords is a firm's records system that is not Karbon (XPM, say):
// it links the names it holds to its own client ids; asked are the
// candidates it was asked about.
type otherRecords struct {
	mu    sync.Mutex
	names map[string]string
	asked []linking.Candidate
}

func (r *otherRecords) LinkClient(_ context.Context, _ practice.Tenant, c linking.Candidate) (linking.Link, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, c)
	if id := r.names[c.Name]; id != "" {
		return linking.Link{Client: id, Outcome: linking.Linked}, nil
	}
	return linking.Link{}, nil
}

func (r *otherRecords) link(name, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[name] = id
}

// billingLedger is Karbon's billing in the ledger role, as `ledger karbon`
// opens it, on accessKey, linking through l (nil: link_clients off).
func billingLedger(t *testing.T, k *vendortest.Karbon, accessKey string, l linking.Linker, deps upstream.Deps) *karbon.Adapter {
	t.Helper()
	cfg := karbon.Config{Firm: "frm_acme", AccessKey: accessKey, Bearer: k.Bearer, BaseURL: k.URL,
		WebhookSigningKey: "karbon-signing-key-0001",
		Upstream:          upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
	opts := []karbon.Option{karbon.AsLedger(), karbon.InRole("ledger")}
	if l != nil {
		opts = append(opts, karbon.WithClientLinker(l))
	}
	a, err := karbon.New(cfg, deps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// linkedBilling adds invoices whose billed clients' names say how each
// may link: IL01 bills C010 as "Birch & Co", IL02 C011 as "Nobody Known",
// IL03 C012 under the name of organization O004.
func linkedBilling(k *vendortest.Karbon) {
	for _, inv := range []vendortest.KarbonInvoice{
		{InvoiceKey: "IL01", ClientKey: "C010", ClientType: "Contact", ClientName: "Birch & Co"},
		{InvoiceKey: "IL02", ClientKey: "C011", ClientType: "Contact", ClientName: "Nobody Known"},
		{InvoiceKey: "IL03", ClientKey: "C012", ClientType: "Contact", ClientName: "Org 004 Ltd"},
	} {
		inv.InvoiceNumber, inv.Total, inv.CurrencyCode, inv.Status = "KIN-"+inv.InvoiceKey, "300.00", "GBP", "AwaitingPayment"
		inv.InvoiceDate, inv.DueDate, inv.CreatedAt, inv.UpdatedAt = epoch, epoch.AddDate(0, 0, 14), epoch, epoch
		k.AddInvoice(inv)
	}
}

func readInvoice(t *testing.T, a *karbon.Adapter, id string) (practice.Invoice, json.RawMessage) {
	t.Helper()
	raw, err := a.Get(context.Background(), live, practice.Invoices, id)
	if err != nil {
		t.Fatal(err)
	}
	var inv practice.Invoice
	if err := json.Unmarshal(raw, &inv); err != nil {
		t.Fatal(err)
	}
	return inv, raw
}

// Karbon's billing beside another records system names that system's
// client for the billed client (linking's rule, asked by the billed
// client's name), null where it has none, never a Karbon id its
// /v1/clients would answer 404 to; a link found later moves the invoice's
// version past the one served, and it stays there. With linking off,
// every invoice names no client.
func TestKarbonBillingLinksAnotherRecordsSystemsClients(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	linkedBilling(k)
	records := &otherRecords{names: map[string]string{"Birch & Co": "cli_xpm-birch", "Org Ltd": "cli_xpm-org"}}
	state := changes.NewMemoryState()
	clock := vendortest.NewClock(epoch)
	a := billingLedger(t, k, k.AccessKey, records, upstream.Deps{State: state, Clock: clock})

	listed := pageAll(t, a, practice.Invoices, practice.Filter{}, 100)
	if len(listed) != 233 {
		t.Fatalf("%d invoices, want 233", len(listed))
	}
	for _, inv := range listed {
		switch c := inv["client"]; c {
		case nil, "cli_xpm-birch", "cli_xpm-org":
		default:
			t.Fatalf("%s names %v, which is no client of the records system", inv["id"], c)
		}
	}
	if inv, _ := readInvoice(t, a, "inv_IL01"); practice.ValueOf(inv.Client) != "cli_xpm-birch" {
		t.Fatalf("linked invoice names %v", inv.Client)
	}
	if inv, _ := readInvoice(t, a, "inv_I0007"); practice.ValueOf(inv.Client) != "cli_xpm-org" {
		t.Fatalf("the organization's invoice names %v", inv.Client)
	}
	before, raw := readInvoice(t, a, "inv_IL02")
	if before.Client != nil || !strings.Contains(string(raw), `"client":null`) {
		t.Fatalf("unlinked invoice %s", raw)
	}
	records.mu.Lock()
	asked := records.asked[len(records.asked)-1]
	records.mu.Unlock()
	if asked.Ref != "cli_c-C011" || asked.Name != "Nobody Known" || asked.Account == "" || asked.External != "" {
		t.Fatalf("asked the records system %+v", asked)
	}

	// The read model kept it unlinked; then the client is made in the
	// records system.
	id := "inv_IL02"
	if err := state.Save(context.Background(), changes.StateKey(live, practice.Invoices, id), raw); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	records.link("Nobody Known", "cli_xpm-known")
	after, raw := readInvoice(t, a, id)
	if practice.ValueOf(after.Client) != "cli_xpm-known" || after.Version <= before.Version || after.UpdatedAt.Before(before.UpdatedAt) {
		t.Fatalf("late link: before %+v\nafter %+v", before, after)
	}
	if err := state.Save(context.Background(), changes.StateKey(live, practice.Invoices, id), raw); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if again, _ := readInvoice(t, a, id); again.Version != after.Version || !again.UpdatedAt.Equal(after.UpdatedAt) {
		t.Fatalf("read again: version %d, was %d", again.Version, after.Version)
	}

	off := billingLedger(t, k, k.AccessKey, nil, upstream.Deps{Clock: clock})
	for _, inv := range pageAll(t, off, practice.Invoices, practice.Filter{}, 100) {
		if inv["client"] != nil {
			t.Fatalf("with linking off %s names %v", inv["id"], inv["client"])
		}
	}
}

// Karbon's billing beside the same practice's Karbon records names the
// billed Karbon client, which /v1/clients reads, asking Karbon nothing
// for it, as the records adapter keeping its own invoices does. Beside
// another practice's Karbon records it is that practice's client by name,
// or null.
func TestKarbonBillingBesideKarbonRecords(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	linkedBilling(k)
	records, _ := newAdapter(t, k)
	keeps := ledgerAdapter(t, k) // records karbon with no ledger named
	same := billingLedger(t, k, k.AccessKey, records, upstream.Deps{Clock: vendortest.NewClock(epoch)})

	ownClients := byIDs(pageAll(t, records, practice.Clients, practice.Filter{}, 100))
	before := len(k.Requests())
	listed := pageAll(t, same, practice.Invoices, practice.Filter{}, 100)
	for _, r := range k.Requests()[before:] {
		if !strings.HasPrefix(r, "GET /v3/Invoices") && !strings.HasPrefix(r, "GET /v3/Payments") {
			t.Errorf("linking the same practice's clients read %s", r)
		}
	}
	kept := byIDs(pageAll(t, keeps, practice.Invoices, practice.Filter{}, 100))
	for _, inv := range listed {
		id := inv["id"].(string)
		if inv["client"] != kept[id]["client"] {
			t.Errorf("%s names %v beside the same practice's records, %v kept by them", id, inv["client"], kept[id]["client"])
		}
	}
	for id, want := range map[string]string{"inv_IL01": "cli_c-C010", "inv_IL03": "cli_c-C012", "inv_I0007": "cli_o-O007", "inv_I0010": "cli_g-G001"} {
		inv, _ := readInvoice(t, same, id)
		if practice.ValueOf(inv.Client) != want {
			t.Errorf("%s names %v, want the Karbon client %s", id, inv.Client, want)
		}
		if ownClients[want] == nil {
			t.Errorf("%s is no client of the records", want)
		}
	}

	// Another practice (another access key): its own clients, by name.
	k.AddAccessKey("access-key-other-practice")
	other, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) { c.AccessKey = "access-key-other-practice" })
	beside := billingLedger(t, k, k.AccessKey, other, upstream.Deps{Clock: vendortest.NewClock(epoch)})
	for id, want := range map[string]string{"inv_IL01": "", "inv_IL03": "cli_o-O004", "inv_I0003": ""} {
		if inv, _ := readInvoice(t, beside, id); practice.ValueOf(inv.Client) != want {
			t.Errorf("beside another practice %s names %v, want %q", id, inv.Client, want)
		}
	}
}

// The invoice events of Karbon's billing carry the linked client: its
// client_id where the records system links one, none where it does not.
func TestKarbonBillingEventsCarryTheLinkedClient(t *testing.T) {
	k := fixture(t)
	linkedBilling(k)
	records := &otherRecords{names: map[string]string{"Birch & Co": "cli_xpm-birch"}}
	state := changes.NewMemoryState()
	a := billingLedger(t, k, k.AccessKey, records, upstream.Deps{State: state, Clock: vendortest.NewClock(epoch)})
	for _, raw := range vendortest.ListAll(t, a, live, practice.Invoices, practice.Filter{}, 200) {
		var v struct{ ID string }
		json.Unmarshal(raw, &v)
		if err := state.Save(context.Background(), changes.StateKey(live, practice.Invoices, v.ID), raw); err != nil {
			t.Fatal(err)
		}
	}
	s := &sink{}
	h := a.Webhook(s)
	for _, key := range []string{"IL01", "IL02"} {
		k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: key, PaymentMethod: "Check", Amount: "300.00", PaymentDate: epoch})
		body := vendortest.KarbonWebhook("Invoice", key, "Updated", epoch.Add(time.Hour))
		if code := deliver(h, body, vendortest.SignKarbon("karbon-signing-key-0001", body)); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
	}
	want := map[string]string{"inv_IL01": "cli_xpm-birch", "inv_IL02": ""}
	got := s.all()
	if len(got) != 2 {
		t.Fatalf("%d change records, want 2", len(got))
	}
	for _, c := range got {
		c.ID, c.Firm = "chg_"+c.ResourceID, "frm_acme"
		events, err := dispatcher.Derive(c)
		if err != nil || len(events) != 1 || events[0].Event != dispatcher.InvoicePaid {
			t.Fatalf("%s raised %+v, %v", c.ResourceID, events, err)
		}
		var data map[string]any
		if err := json.Unmarshal(events[0].Data, &data); err != nil {
			t.Fatal(err)
		}
		client, named := data["client_id"]
		if w := want[c.ResourceID]; (w == "") == named || (named && client != w) {
			t.Errorf("%s: invoice.paid data %s, want client_id %q", c.ResourceID, events[0].Data, w)
		}
	}
}

func byIDs(records []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, r := range records {
		out[r["id"].(string)] = r
	}
	return out
}

// `ledger karbon` is opened with the firm's linker (firmsystem.Deps.Clients)
// unless its block says link_clients off; another value is refused.
func TestLedgerBlockLinksClients(t *testing.T) {
	k := fixture(t)
	linkedBilling(k)
	records := &otherRecords{names: map[string]string{"Birch & Co": "cli_xpm-birch"}}
	for _, tc := range []struct {
		block, want string
	}{
		{"", "cli_xpm-birch"},
		{"link_clients records", "cli_xpm-birch"},
		{"link_clients off", ""},
	} {
		var m karbon.Ledger
		d := caddyfile.NewTestDispenser(fmt.Sprintf("karbon {\n access_key %s\n bearer %s\n base_url %s\n %s\n}", k.AccessKey, k.Bearer, k.URL, tc.block))
		if err := m.UnmarshalCaddyfile(d); err != nil {
			t.Fatalf("%q: %v", tc.block, err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("%q: %v", tc.block, err)
		}
		opened, err := m.Open(firmsystem.Deps{Firm: "frm_acme", Clients: records})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := opened.Reader.Get(context.Background(), live, practice.Invoices, "inv_IL01")
		if err != nil {
			t.Fatal(err)
		}
		var inv practice.Invoice
		if err := json.Unmarshal(raw, &inv); err != nil {
			t.Fatal(err)
		}
		if practice.ValueOf(inv.Client) != tc.want {
			t.Errorf("%q: the invoice names %v, want %q", tc.block, inv.Client, tc.want)
		}
	}
	m := karbon.Ledger{Config: karbon.Config{AccessKey: "k", Bearer: "b"}, LinkClients: "sometimes"}
	if err := m.Validate(); err == nil {
		t.Fatal("link_clients sometimes was taken")
	}
}
