package xero

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"reflect"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

// TestDecodeInvoices reads a page written as Xero writes one: escaped
// slashes in dates, amounts as numbers or strings, null members, and
// nested members the adapter does not read.
func TestDecodeInvoices(t *testing.T) {
	b, err := os.ReadFile("testdata/invoices.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeInvoices(b)
	if err != nil {
		t.Fatal(err)
	}
	want := invoices{Pagination: &pagination{PageCount: 4, ItemCount: 11}, Invoices: []invoice{{
		InvoiceID: "243216c5-369e-4056-ac67-05388f86dc81", InvoiceNumber: "INV-0546", Type: "ACCREC", Status: "PAID",
		Contact: contact{ContactID: "025867f1-d741-4d6b-b1af-9ac774b59ba7", Name: "City Agency & Sons"},
		Date:    "/Date(1772409600000+0000)/", DueDate: "/Date(1774992000000+0000)/",
		Total: "2025.00", AmountDue: "0.00", AmountPaid: "2025.00", AmountCredited: "0.00", CurrencyCode: "NZD",
		FullyPaidOnDate: "/Date(1772445600000+0000)/", UpdatedDateUTC: "/Date(1772449200000+0000)/",
		Payments: []payment{{Date: "/Date(1772445600000+0000)/", Reference: "GoCardless payout",
			Account: &account{Code: "090", Name: "Business Bank Account"}}},
	}, {
		InvoiceID: "9b9ba9e5-e907-4b4e-8210-54d82b0aa479", Type: "ACCREC", Status: "AUTHORISED",
		Date: "2026-03-02T00:00:00", Total: "200.50", AmountDue: "140.5", AmountCredited: "60", CurrencyCode: "GBP",
		UpdatedDateUTC: "2026-03-02T09:30:15.120", CreditNotes: 1, Overpayments: 1,
	}, {
		InvoiceID: "d6b4d8d5-2f1e-4b1f-8a4c-3c7e0f3e8b21", Type: "ACCPAY", Status: "DRAFT", Total: "12.3e1",
		CurrencyCode: "EUR", UpdatedDateUTC: "/Date(1772449200000+0000)/",
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

// TestDecodeInvoicesRefuses checks the members the adapter reads for their
// kind, and the whole answer for being JSON.
func TestDecodeInvoicesRefuses(t *testing.T) {
	for _, in := range []string{
		`{"Invoices": [{"InvoiceID": "x"}, {"Contact": {"Name": 5}}]}`,
		`{"Invoices": [{"Total": {"Value": 1}}]}`,
		`{"Invoices": [{"AmountDue": true}]}`,
		`{"Invoices": [{"CreditNotes": {}}]}`,
		`{"Invoices": [{"Overpayments": [1,]}]}`,
		`{"Invoices": [{"LineItems": [{"a": [1,]}]}]}`,
		`{"pagination": {"pageCount": 2.5}}`,
		`{"Invoices": []} {}`,
		`{"Invoices": [{"InvoiceNumber": "INV-1`,
		``,
	} {
		if _, err := decodeInvoices([]byte(in)); err == nil {
			t.Errorf("%s: read without an error", in)
		}
	}
}

// FuzzDecodeInvoices feeds answers to the decoder and the translation
// after it: whatever a vendor sends, the adapter answers or refuses, and
// never panics.
func FuzzDecodeInvoices(f *testing.F) {
	b, err := os.ReadFile("testdata/invoices.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"Invoices": [null, {"Total": "1e400", "CreditNotes": [{}, null]}]}`))
	a, err := New(Config{TenantID: "t", OAuth2: upstream.OAuth2Config{AccessToken: "token"}}, upstream.Deps{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		invs, err := decodeInvoices(b)
		if err != nil {
			return
		}
		for i := range invs.Invoices {
			a.invoiceJSON(context.Background(), practice.Tenant{Firm: "frm_fuzz"}, &invs.Invoices[i])
		}
	})
}

// BenchmarkInvoicePage reads and translates the page of bench/adapters: 51
// invoices as the Xero double writes them, and again with the slashes
// escaped, as Xero writes them.
func BenchmarkInvoicePage(b *testing.B) {
	x := vendortest.NewXero()
	defer x.Close()
	x.AddLedgerPage(100)
	req, _ := http.NewRequest(http.MethodGet, x.URL+"/Invoices?page=1&pageSize=51", nil)
	req.Header = http.Header{"Authorization": {"Bearer " + x.Token}, "Xero-Tenant-Id": {x.TenantID}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Config{TenantID: x.TenantID, OAuth2: upstream.OAuth2Config{AccessToken: "token"}}, upstream.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	escaped := bytes.ReplaceAll(bytes.ReplaceAll(page, []byte(`"/Date(`), []byte(`"\/Date(`)), []byte(`)/"`), []byte(`)\/"`))
	for _, body := range []struct {
		name string
		b    []byte
	}{{"double", page}, {"escaped", escaped}} {
		b.Run(body.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body.b)))
			for b.Loop() {
				invs, err := decodeInvoices(body.b)
				if err != nil {
					b.Fatal(err)
				}
				found := make([]paging.Found[invoice], 50)
				for i := range found {
					found[i].Item = invs.Invoices[i]
				}
				if _, err := a.invoicesJSON(context.Background(), practice.Tenant{Firm: "frm_bench"}, found); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
