package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// startKarbonBillingFirm is a firm whose records are Karbon and whose block
// names no ledger, so its invoices are Karbon's billing: 6 contacts, an
// organization, 130 invoices (two Karbon pages; every tenth paid by check,
// the 5th part paid), served from the double through the real binary with
// the ingest route Karbon's webhooks are subscribed to.
func startKarbonBillingFirm(t *testing.T) (*gateway, *vendortest.Karbon) {
	t.Helper()
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	k := vendortest.StartKarbon(t)
	k.AddUser(vendortest.KarbonUser{Id: "U1", Name: "Pat Partner", EmailAddress: "pat@quill.example", Roles: []string{"Partner"}})
	for i := range 6 {
		k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann", LastName: fmt.Sprintf("Client%03d", i),
			ContactType: "Client", Email: fmt.Sprintf("ann%d@example.com", i), Country: "GB", OwnerKey: "U1", LastModified: epoch})
	}
	// What was paid before the gateway looked was paid in March.
	k.SetNow(func() time.Time { return epoch.AddDate(0, 0, 3) })
	k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: "O001", FullName: "Quill Holdings Ltd", ContactType: "Client",
		EntityType: "Corporation", Country: "GB", OwnerKey: "U1", LastModified: epoch})
	for i := range 130 {
		inv := vendortest.KarbonInvoice{InvoiceKey: fmt.Sprintf("I%04d", i), InvoiceNumber: fmt.Sprintf("KIN-%04d", 1000+i),
			ClientKey: fmt.Sprintf("C%03d", i%6), ClientType: "Contact", ClientName: "Ann", Total: "1200.00", Tax: "200.00",
			CurrencyCode: "GBP", Status: "AwaitingPayment", InvoiceDate: epoch, DueDate: epoch.AddDate(0, 0, 14),
			CreatedAt: epoch.Add(time.Duration(i) * time.Minute), UpdatedAt: epoch.Add(time.Duration(i) * time.Minute)}
		if i == 7 {
			inv.ClientKey, inv.ClientType = "O001", "Organization"
		}
		k.AddInvoice(inv)
		if i%10 == 0 {
			k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: inv.InvoiceKey, PaymentMethod: "Check", Amount: "1200.00", PaymentDate: epoch.AddDate(0, 0, 3)})
		}
	}
	k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: "I0005", PaymentMethod: "Bank Transfer", Amount: "200.00", PaymentDate: epoch.AddDate(0, 0, 3)})
	k.SetNow(func() time.Time { return time.Now().UTC().Truncate(time.Second) })
	caddyfile := fmt.Sprintf(`{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		firm frm_quill {
			name "Quill & Ledger LLP"
			records karbon {
				access_key {env.TEST_KARBON_ACCESS_KEY}
				bearer {env.TEST_KARBON_BEARER}
				base_url %s
				webhook_signing_key %s
				upstream {
					timeout 2s
					rate_limit 6000/m
				}
			}
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	handle /ingest/frm_quill/karbon {
		practicegw_ingest frm_quill records
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
`, k.URL, karbonSigningKey)
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{config: path, env: []string{"TEST_KARBON_ACCESS_KEY=" + k.AccessKey,
		"TEST_KARBON_BEARER=" + k.Bearer, "PRACTICEGW_SYNC_POLL=1s"}})
	waitSyncs(t, g, 20*time.Second, "every sync to be live", allLive)
	return g, k
}

// TestKarbonFirmBillsInKarbon: a Karbon firm that bills in Karbon reads
// its invoices at /v1/invoices (backfilled, filtered and paged); an
// invoice paid by card in Karbon Payments raises one invoice.paid with
// settled_via card, told by Karbon's Invoice webhook; a new invoice
// raises invoice.raised; and one deleted in Karbon is found by the
// reconciliation and raises invoice.deleted with its tombstone.
func TestKarbonFirmBillsInKarbon(t *testing.T) {
	g, k := startKarbonBillingFirm(t)
	tok := g.issue("frm_quill", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "invoice.raised", "invoice.paid", "invoice.deleted")
	rc.setSecrets(secret)

	// The backfill: every invoice, across Karbon's pages and ours.
	invoices := byID(pageAll(t, g, tok, "/v1/invoices", 40))
	if len(invoices) != 130 {
		t.Fatalf("%d invoices, want Karbon's 130", len(invoices))
	}
	clients := byID(pageAll(t, g, tok, "/v1/clients", 50))
	for id, inv := range invoices {
		if clients[inv["client"].(string)] == nil {
			t.Fatalf("%s bills %v, which is no /v1 client", id, inv["client"])
		}
	}
	if inv := invoices["inv_I0010"]; inv["status"] != "paid" || inv["settled_via"] != "check" || inv["paid_at"] != "2026-03-05T00:00:00Z" {
		t.Fatalf("invoice paid by check: %v", inv)
	}
	if inv := invoices["inv_I0005"]; inv["status"] != "partially_paid" || inv["amount_due"].(map[string]any)["amount"] != "1000.00" {
		t.Fatalf("invoice part paid: %v", inv)
	}
	if inv := invoices["inv_I0007"]; inv["client"] != "cli_o-O001" || inv["status"] != "issued" {
		t.Fatalf("invoice of the organization: %v", inv)
	}

	// A card payment in Karbon Payments, told by Karbon's webhook.
	since := time.Now().UTC().Truncate(time.Second).Add(-time.Second)
	k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: "I0042", PaymentType: "Payment", PaymentMethod: "Card",
		CardType: "Visa", CardFunding: "credit", Amount: "1200.00"})
	body := vendortest.KarbonWebhook("Invoice", "I0042", "Updated", time.Now())
	if code := postSigned(t, g, "/ingest/frm_quill/karbon", body, "Signature", vendortest.SignKarbon(karbonSigningKey, body)); code != http.StatusOK {
		t.Fatalf("Karbon's Invoice webhook answered %d", code)
	}
	paid := rc.wait(1, 15*time.Second)[0]
	data := paid.envelope["data"].(map[string]any)
	if paid.envelope["event"] != "invoice.paid" || data["invoice_id"] != "inv_I0042" || data["settled_via"] != "card" || data["client_id"] != "cli_c-C000" {
		t.Fatalf("delivered for the card payment: %s", paid.body)
	}

	// A new invoice approved in Karbon: the poll announces it raised.
	k.AddInvoice(vendortest.KarbonInvoice{InvoiceKey: "I9001", InvoiceNumber: "KIN-9001", ClientKey: "C003", ClientType: "Contact",
		ClientName: "Ann", Total: "480.00", CurrencyCode: "GBP", Status: "Approved", InvoiceDate: time.Now(), DueDate: time.Now().AddDate(0, 0, 30)})
	eventually.NoError(t, 15*time.Second, poll, "invoice.raised for inv_I9001", func() error {
		for _, d := range rc.wait(0, 0) {
			if d.envelope["event"] == "invoice.raised" && d.envelope["data"].(map[string]any)["invoice_id"] == "inv_I9001" {
				return nil
			}
		}
		return fmt.Errorf("%d deliveries", len(rc.wait(0, 0)))
	})

	// What changed since, filtered and paged: the paid one and the new one.
	changed := pageAll(t, g, tok, "/v1/invoices?updated_since="+url.QueryEscape(since.Format(time.RFC3339)), 1)
	if ids := byID(changed); len(ids) != 2 || ids["inv_I0042"] == nil || ids["inv_I9001"] == nil || ids["inv_I0042"]["settled_via"] != "card" {
		t.Fatalf("invoices updated since %s: %v", since, changed)
	}

	// A deletion: Karbon's webhook says nothing of it; the reconciliation
	// finds it, on Karbon's 404.
	k.RemoveInvoice("I0099")
	if out, err := g.cli("sync", "resync", "--firm", "frm_quill", "--system", "ledger"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	eventually.True(t, 15*time.Second, poll, "inv_I0099 to be 404 after the reconciliation", func() bool {
		return g.do(t, "GET", "/v1/invoices/inv_I0099", tok, nil).StatusCode == http.StatusNotFound
	})
	var deleted map[string]any
	eventually.NoError(t, 15*time.Second, poll, "invoice.deleted for inv_I0099", func() error {
		for _, d := range rc.wait(0, 0) {
			if d.envelope["event"] == "invoice.deleted" {
				deleted = d.envelope["data"].(map[string]any)
				return nil
			}
		}
		return fmt.Errorf("no invoice.deleted yet")
	})
	if object, _ := deleted["object"].(map[string]any); deleted["invoice_id"] != "inv_I0099" || object["deleted"] != true {
		t.Fatalf("invoice.deleted data: %v", deleted)
	}

	// More polls raise nothing again: one event for each change.
	waitConfirmed(t, g, tok, "/v1/invoices", 2*time.Second)
	count := map[string]int{}
	for _, d := range rc.wait(0, 0) {
		count[fmt.Sprint(d.envelope["event"])]++
	}
	if count["invoice.paid"] != 1 || count["invoice.raised"] != 1 || count["invoice.deleted"] != 1 || len(count) != 3 {
		t.Fatalf("deliveries by event: %v, want one of each", count)
	}
}
