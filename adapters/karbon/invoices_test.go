package karbon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// billing adds 230 invoices to the fixture's Karbon, so that the list
// crosses Karbon's pages: each bills a contact (every seventh an
// organization), for 1200.00 with 200.00 of VAT, dated from epoch, in
// AwaitingPayment; then a few are paid, part paid, voided or approved
// only. It answers the keys of the special ones.
func billing(t *testing.T, k *vendortest.Karbon) map[string]string {
	t.Helper()
	for i := range 230 {
		inv := vendortest.KarbonInvoice{InvoiceKey: fmt.Sprintf("I%04d", i), InvoiceNumber: fmt.Sprintf("KIN-%04d", 1000+i),
			ClientKey: fmt.Sprintf("C%03d", i%100), ClientType: "Contact", ClientName: "Ann",
			Total: "1200.00", Tax: "200.00", CurrencyCode: "GBP", Status: "AwaitingPayment",
			InvoiceDate: epoch.AddDate(0, 0, i%60), DueDate: epoch.AddDate(0, 0, i%60+14),
			CreatedAt: epoch.Add(time.Duration(i) * time.Minute), UpdatedAt: epoch.Add(time.Duration(i) * time.Minute)}
		if i%7 == 0 {
			inv.ClientKey, inv.ClientType, inv.ClientName = fmt.Sprintf("O%03d", i%30), "Organization", "Org Ltd"
		}
		k.AddInvoice(inv)
	}
	special := map[string]string{"card": "I0001", "ach": "I0002", "check": "I0003", "cash": "I0004", "part": "I0005",
		"void": "I0006", "approved": "I0008", "exported": "I0009", "usd": "I0010"}
	pay := func(key string, p vendortest.KarbonInvoicePayment) string {
		p.InvoiceKey = key
		p.PaymentDate = epoch.AddDate(0, 1, 0)
		if p.Amount == "" {
			p.Amount = "1200.00"
		}
		return k.PayInvoice(p)
	}
	pay(special["card"], vendortest.KarbonInvoicePayment{PaymentType: "Payment", PaymentMethod: "Card", CardType: "Visa", CardFunding: "credit"})
	pay(special["ach"], vendortest.KarbonInvoicePayment{PaymentType: "Payment", PaymentMethod: "ACH Direct Debit", CardFunding: "ach"})
	pay(special["check"], vendortest.KarbonInvoicePayment{PaymentMethod: "Check"})
	pay(special["cash"], vendortest.KarbonInvoicePayment{PaymentMethod: "Cash"})
	pay(special["part"], vendortest.KarbonInvoicePayment{PaymentMethod: "Bank Transfer", Amount: "450.50"})
	k.SetInvoiceStatus(special["void"], "Voided")
	k.SetInvoiceStatus(special["approved"], "Approved")
	k.SetInvoiceStatus(special["exported"], "Exported")
	pay(special["exported"], vendortest.KarbonInvoicePayment{PaymentMethod: "Direct Debit"})
	k.AddInvoice(vendortest.KarbonInvoice{InvoiceKey: special["usd"], InvoiceNumber: "KIN-USD", ClientKey: "G001", ClientType: "ClientGroup",
		Total: "99.95", CurrencyCode: "usd", Status: "AwaitingPayment", InvoiceDate: epoch, DueDate: epoch.AddDate(0, 0, 30),
		CreatedAt: epoch, UpdatedAt: epoch})
	return special
}

func ledgerAdapter(t *testing.T, k *vendortest.Karbon, opts ...opt) *karbon.Adapter {
	t.Helper()
	clock := vendortest.NewClock(epoch)
	cfg := karbon.Config{Firm: "frm_acme", AccessKey: k.AccessKey, Bearer: k.Bearer, BaseURL: k.URL,
		WebhookSigningKey: "karbon-signing-key-0001",
		Upstream:          upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
	deps := upstream.Deps{Clock: clock}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	a, err := karbon.New(cfg, deps, karbon.AsLedger())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Every Karbon invoice reads as the contract's invoice, across Karbon's
// pages in creation order: its client the billed client's /v1 id, its
// status from InvoiceStatus and what is due, and a paid one's settled_via
// from how its payment was made.
func TestInvoicesFromKarbonBilling(t *testing.T) {
	k := fixture(t)
	special := billing(t, k)
	a := ledgerAdapter(t, k)
	before := len(k.Requests())
	got := pageAll(t, a, practice.Invoices, practice.Filter{}, 40)
	if len(got) != 230 {
		t.Fatalf("%d invoices, want 230", len(got))
	}
	for _, r := range k.Requests()[before:] {
		u, err := url.Parse(strings.TrimPrefix(r, "GET "))
		if err != nil {
			t.Fatal(err)
		}
		if u.Path == "/v3/Invoices" && u.Query().Get("$orderby") != "CreatedAt" {
			t.Errorf("a full listing read invoices in another order: %s", r)
		}
	}
	byID := map[string]map[string]any{}
	for _, inv := range got {
		byID[inv["id"].(string)] = inv
	}
	want := map[string]struct{ status, due, via, client string }{
		special["card"]:     {"paid", "0.00", "card", "cli_c-C001"},
		special["ach"]:      {"paid", "0.00", "ach", "cli_c-C002"},
		special["check"]:    {"paid", "0.00", "check", "cli_c-C003"},
		special["cash"]:     {"paid", "0.00", "cash", "cli_c-C004"},
		special["part"]:     {"partially_paid", "749.50", "", "cli_c-C005"},
		special["void"]:     {"void", "0.00", "", "cli_c-C006"},
		"I0007":             {"issued", "1200.00", "", "cli_o-O007"},
		special["approved"]: {"issued", "1200.00", "", "cli_c-C008"},
		special["exported"]: {"paid", "0.00", "direct_debit", "cli_c-C009"},
		special["usd"]:      {"issued", "99.95", "", "cli_g-G001"},
	}
	for key, w := range want {
		inv := byID["inv_"+key]
		if inv == nil {
			t.Fatalf("no invoice inv_%s", key)
		}
		via, _ := inv["settled_via"].(string)
		if inv["status"] != w.status || inv["amount_due"].(map[string]any)["amount"] != w.due || via != w.via || inv["client"] != w.client {
			t.Errorf("inv_%s = %v, want status %s due %s via %q client %s", key, inv, w.status, w.due, w.via, w.client)
		}
		if w.status == "paid" && inv["paid_at"] != "2026-04-02T00:00:00Z" {
			t.Errorf("inv_%s paid_at %v, want the payment's date", key, inv["paid_at"])
		}
		if w.status != "paid" && inv["paid_at"] != nil {
			t.Errorf("inv_%s paid_at %v while not paid", key, inv["paid_at"])
		}
	}
	card := byID["inv_"+special["card"]]
	if card["number"] != "KIN-1001" || card["total"].(map[string]any)["amount"] != "1200.00" ||
		card["total"].(map[string]any)["currency"] != "GBP" || card["issued_on"] != "2026-03-03" || card["due_on"] != "2026-03-17" ||
		card["object"] != "invoice" || card["created_at"] != "2026-03-03T00:00:00Z" {
		t.Errorf("card-paid invoice %v", card)
	}
	if usd := byID["inv_"+special["usd"]]; usd["total"].(map[string]any)["currency"] != "USD" || usd["total"].(map[string]any)["amount"] != "99.95" {
		t.Errorf("USD invoice %v", usd)
	}
	// One read alone is the same record.
	raw, err := a.Get(context.Background(), live, practice.Invoices, "inv_"+special["card"])
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := json.Marshal(card)
	var one map[string]any
	json.Unmarshal(raw, &one)
	again, _ := json.Marshal(one)
	if string(again) != string(listed) {
		t.Errorf("Get = %s\nlisted %s", again, listed)
	}
}

// A paid invoice's payments are read once: a listing again, with nothing
// changed, reads list pages alone.
func TestSettlementIsReadOncePerInvoiceState(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	state := changes.NewMemoryState()
	a := ledgerAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.State = state })
	pageAll(t, a, practice.Invoices, practice.Filter{}, 200)
	before := len(k.Requests())
	pageAll(t, a, practice.Invoices, practice.Filter{}, 200)
	for _, r := range k.Requests()[before:] {
		if !strings.HasPrefix(r, "GET /v3/Invoices?") {
			t.Errorf("a second listing read %s", r)
		}
	}
}

// A poll reads the most recently updated invoices first and ends at the
// first one updated before its time: with nothing changed, one page; a
// card payment since is the one invoice it returns, paid by card.
func TestInvoicePollReadsLatestFirst(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	a := ledgerAdapter(t, k)
	pageAll(t, a, practice.Invoices, practice.Filter{}, 200)
	since := time.Now().UTC().Add(time.Minute)
	before := len(k.Requests())
	if got := pageAll(t, a, practice.Invoices, practice.Filter{UpdatedSince: since}, 200); len(got) != 0 {
		t.Fatalf("%d invoices changed, want none", len(got))
	}
	lists := listRequests(t, k, before)
	if len(lists["Invoices"]) != 1 || lists["Invoices"][0].Get("$orderby") != "UpdatedAt desc" || len(lists) != 1 {
		t.Fatalf("a poll with nothing changed read %v, want one page most recently updated first", lists)
	}
	k.SetNow(func() time.Time { return since.Add(time.Hour) })
	k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: "I0200", PaymentType: "Payment", PaymentMethod: "Card",
		CardType: "Mastercard", CardFunding: "debit", Amount: "1200.00", PaymentDate: since})
	got := pageAll(t, a, practice.Invoices, practice.Filter{UpdatedSince: since}, 200)
	if len(got) != 1 || got[0]["id"] != "inv_I0200" || got[0]["status"] != "paid" || got[0]["settled_via"] != "card" {
		t.Fatalf("poll = %v", got)
	}
}

// A reversed manual payment makes a paid invoice owed again: a later
// version, issued, with neither settled_via nor paid_at.
func TestReversedManualPaymentReopensTheInvoice(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	a := ledgerAdapter(t, k)
	get := func() practice.Invoice {
		t.Helper()
		raw, err := a.Get(context.Background(), live, practice.Invoices, "inv_I0100")
		if err != nil {
			t.Fatal(err)
		}
		var inv practice.Invoice
		json.Unmarshal(raw, &inv)
		return inv
	}
	p := k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: "I0100", PaymentMethod: "Check", Amount: "1200.00", PaymentDate: epoch})
	paid := get()
	if paid.Status != "paid" || paid.SettledVia != "check" {
		t.Fatalf("paid = %+v", paid)
	}
	k.ReverseManualPayment(p)
	owed := get()
	if owed.Status != "issued" || owed.SettledVia != "" || owed.PaidAt != nil || owed.AmountDue.Amount != "1200.00" || owed.Version <= paid.Version {
		t.Fatalf("after the reversal %+v (paid version %d)", owed, paid.Version)
	}
}

// An invoice Karbon no longer has is not found; an answer that is not an
// invoice Karbon publishes is the vendor's fault (502), not ours; a next
// link that repeats ends the listing with an error rather than a spin.
func TestInvoiceReadsKarbonCannotAnswer(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	a := ledgerAdapter(t, k)
	k.RemoveInvoice("I0050")
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_I0050"); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("deleted invoice: %v", err)
	}
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_../Users"); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("an id that is no key: %v", err)
	}
	k.FaultOn("/v3/Invoices/I0051", vendortest.Fault{Status: http.StatusOK, Body: `{"InvoiceKey":"I0051","InvoiceNumber":"KIN-1051",` +
		`"TotalAmountDue":1,"InvoiceTotal":1,"InvoiceDate":"2026-03-02T00:00:00Z","PaymentDueDate":"2026-03-02T00:00:00Z",` +
		`"UpdatedAt":"2026-03-02T00:00:00Z","CurrencyCode":"GBP","InvoiceStatus":"Draft","Client":null}`})
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_I0051"); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("an InvoiceStatus Karbon does not publish: %v", err)
	}
	k.FaultOn("/v3/Invoices/I0052", vendortest.Fault{Status: http.StatusOK, Body: `{"InvoiceKey":"I0099","InvoiceNumber":"KIN-1099",` +
		`"TotalAmountDue":1,"InvoiceTotal":1,"InvoiceDate":"2026-03-02T00:00:00Z","PaymentDueDate":"2026-03-02T00:00:00Z",` +
		`"UpdatedAt":"2026-03-02T00:00:00Z","CurrencyCode":"GBP","InvoiceStatus":"Paid","Client":null}`})
	if _, err := a.Get(context.Background(), live, practice.Invoices, "inv_I0052"); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("another invoice answered: %v", err)
	}
	k.LoopNextLinks(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cursor := ""
	var err error
	for range 100 {
		var p practice.Page
		if p, err = a.List(ctx, live, practice.Invoices, practice.Query{Limit: 200, Cursor: cursor}); err != nil || !p.HasMore {
			break
		}
		cursor = p.Next
	}
	if !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("a next link that repeats: %v", err)
	}
}

// The Invoice webhook of a ledger adapter reads the invoice and raises
// one change record; a records-only adapter acknowledges it unread.
func TestInvoiceWebhook(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	state := changes.NewMemoryState()
	a := ledgerAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.State = state })
	for _, raw := range vendortest.ListAll(t, a, live, practice.Invoices, practice.Filter{}, 200) {
		var v struct{ ID string }
		json.Unmarshal(raw, &v)
		if err := state.Save(context.Background(), changes.StateKey(live, practice.Invoices, v.ID), raw); err != nil {
			t.Fatal(err)
		}
	}
	s := &sink{}
	h := a.Webhook(s)
	key := "karbon-signing-key-0001"
	k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: "I0042", PaymentType: "Payment", PaymentMethod: "Card",
		CardType: "Visa", CardFunding: "credit", Amount: "1200.00"})
	body := vendortest.KarbonWebhook("Invoice", "I0042", "Updated", epoch.Add(time.Hour))
	if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	got := s.all()
	if len(got) != 1 || got[0].Kind != practice.Invoices || got[0].ResourceID != "inv_I0042" {
		t.Fatalf("changes %+v", got)
	}
	var before, after practice.Invoice
	json.Unmarshal(got[0].Before, &before)
	json.Unmarshal(got[0].After, &after)
	if before.Status != "issued" || after.Status != "paid" || after.SettledVia != "card" || after.AmountDue.Amount != "0.00" {
		t.Fatalf("%s -> %s via %q", before.Status, after.Status, after.SettledVia)
	}

	// An invoice never seen is left to the sync, which announces it:
	// nothing is read for it here.
	k.AddInvoice(vendortest.KarbonInvoice{InvoiceKey: "I9000", InvoiceNumber: "KIN-9000", ClientKey: "C001", ClientType: "Contact",
		Total: "10.00", Status: "Approved", InvoiceDate: epoch, DueDate: epoch})
	n := len(k.Requests())
	body = vendortest.KarbonWebhook("Invoice", "I9000", "Updated", epoch.Add(time.Hour))
	if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK || len(s.all()) != 1 || len(k.Requests()) != n {
		t.Fatalf("an invoice never seen: status %d, %d changes, reads %v", code, len(s.all()), k.Requests()[n:])
	}

	records, _ := newAdapter(t, k)
	other := &sink{}
	body = vendortest.KarbonWebhook("Invoice", "I0043", "Updated", epoch.Add(time.Hour))
	if code := deliver(records.Webhook(other), body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
		t.Fatalf("records-only adapter answered %d", code)
	}
	if len(other.all()) != 0 || len(k.Requests()) != n {
		t.Fatalf("a records-only adapter read the invoice: %v", k.Requests()[n:])
	}
}
