package xero_test

import (
	"encoding/json"
	"testing"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordscan"
)

// Nothing a Xero record says is made up: an invoice or quote without a
// date has a null created_at (its last update is not its creation), one
// without a contact a null client, and names with '&' and '<' read as
// written, listed and read alone.
func TestXeroRecordsMakeNothingUp(t *testing.T) {
	nullable := recordscan.Repository(t)
	x := fixture(t)
	addQuotes(x, 20)
	x.AddInvoice(vendortest.XeroInvoice{InvoiceID: invID(900), InvoiceNumber: "INV-<900> & co", Status: "AUTHORISED",
		Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: epoch})
	x.AddQuote(vendortest.XeroQuote{QuoteID: quoteID(900), QuoteNumber: "QU-0900", Title: "Accounts & <VAT>", Status: "SENT",
		Total: "10.00", CurrencyCode: "GBP", Updated: epoch})
	a := newAdapter(t, x)
	counts := recordscan.Records(t, a, live, nullable, practice.Invoices, practice.Engagements)
	recordscan.Want(t, counts, map[practice.Kind]int{practice.Invoices: 200, practice.Engagements: 15})

	var inv practice.Invoice
	raw, err := a.Get(t.Context(), live, practice.Invoices, "inv_"+invID(900))
	if err != nil || json.Unmarshal(raw, &inv) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if inv.CreatedAt != nil || inv.Client != nil || practice.ValueOf(inv.Number) != "INV-<900> & co" {
		t.Errorf("an undated invoice without a contact reads %s", raw)
	}
	var e practice.Engagement
	raw, err = a.Get(t.Context(), live, practice.Engagements, "eng_"+quoteID(900))
	if err != nil || json.Unmarshal(raw, &e) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if e.CreatedAt != nil || e.Client != nil || e.LetterDocument != nil {
		t.Errorf("an undated quote without a contact reads %s", raw)
	}
}
