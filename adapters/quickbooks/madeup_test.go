package quickbooks_test

import (
	"encoding/json"
	"testing"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/recordscan"
)

// Nothing a QuickBooks record says is made up: an invoice without a
// DocNumber or a customer has a null number and client, one without a
// creation time a null created_at (its last update is not it), and
// names with '&' and '<' read as written, listed and read alone.
func TestQuickBooksRecordsMakeNothingUp(t *testing.T) {
	nullable := recordscan.Repository(t)
	q := fixture(t, 30)
	q.AddInvoice(vendortest.QBInvoice{ID: "900", TxnDate: epoch, Total: "10.00", Updated: epoch})
	q.AddEstimate(vendortest.QBEstimate{ID: "901", DocNumber: "E901", CustomerID: "7", CustomerName: "Birch & Co <LLP>",
		TxnDate: epoch, Lines: []string{"Accounts & returns"}, Total: "100.00", Currency: "GBP", Updated: epoch})
	a := estimateAdapter(t, q, nil, changes.NewMemoryState(), func() bool { return true })
	counts := recordscan.Records(t, a, live, nullable, practice.Invoices, practice.Engagements)
	recordscan.Want(t, counts, map[practice.Kind]int{practice.Invoices: 30, practice.Engagements: 1})

	var inv practice.Invoice
	raw, err := a.Get(t.Context(), live, practice.Invoices, "inv_qb-900")
	if err != nil || json.Unmarshal(raw, &inv) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if inv.Number != nil || inv.Client != nil {
		t.Errorf("an invoice without a number or a customer reads %s", raw)
	}
}
