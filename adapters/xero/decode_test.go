package xero

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/practice"
)

// TestDecodeInvoices reads a page written as Xero writes one: escaped
// slashes in dates, amounts as numbers or strings, null members, and
// nested members the adapter does not read.
func TestDecodeInvoices(t *testing.T) {
	b, err := os.ReadFile("testdata/invoices.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeInvoices(b, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := invoices{Pagination: &pagination{PageCount: 4}, Invoices: []invoice{{
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
	if ref, err := reference(b); err != nil || !reflect.DeepEqual(got, ref) {
		t.Fatalf("reflection reads it as\n%+v, %v", ref, err)
	}
}

// agreeing are answers on which decodeInvoices must agree with decoding
// the wire shapes by reflection: the same values, or an error from both.
var agreeing = []string{
	`{}`, `null`, ` {"Invoices": []} `, `{"Invoices": null}`, `{"Invoices": [null, {}]}`,
	`{"pagination": null}`, `{"pagination": {"pageCount": null}}`, `{"pagination": {"pageCount": -0}}`,
	// Repeated names: the last value, merged into a struct as reflection does.
	`{"Invoices": [{"InvoiceID": "a", "InvoiceID": "b"}]}`,
	`{"Invoices": [{"Contact": {"ContactID": "a"}, "Contact": {"Name": "b"}}]}`,
	`{"Invoices": [{"Contact": {"ContactID": "a"}, "Contact": null}]}`,
	`{"Invoices": [{"Payments": [{}, {}]}], "Invoices": [{"Payments": [{"Status": "DELETED"}]}]}`,
	`{"Invoices": [{"Payments": [{"Account": {"Code": "1"}, "Account": {"Name": "n"}}]}]}`,
	`{"pagination": {"pageCount": 2}, "pagination": {"page": 3}}`,
	// Escapes and invalid UTF-8.
	`{"Invoices": [{"Invoice\u0049D": "\ud83d\ude00 \u00e9 \/ \b\f\n\r\t \\ \""}]}`,
	"{\"Invoices\": [{\"Status\": \"\xff\xfe\", \"Type\": \"\\ud800\"}]}",
	"{\"Invoices\": [{\"Status\": \"caf\xc3\xa9\"}]}",
	// Amounts: numbers as written, strings as they hold, nothing else.
	`{"Invoices": [{"Total": -0.5e+10, "AmountDue": " 12 ", "AmountPaid": null}]}`,
	`{"Invoices": [{"Total": true}]}`, `{"Invoices": [{"Total": {}}]}`, `{"Invoices": [{"AmountDue": []}]}`,
	// Values of the wrong kind.
	`{"Invoices": {}}`, `{"Invoices": [1]}`, `{"Invoices": [{"InvoiceID": 7}]}`, `{"Invoices": [{"Contact": "x"}]}`,
	`{"Invoices": [{"CreditNotes": {}}]}`, `{"Invoices": [{"Payments": [[]]}]}`, `{"pagination": {"pageCount": 1.5}}`,
	`{"pagination": {"pageCount": 1e2}}`, `{"pagination": {"pageCount": "2"}}`, `{"pagination": {"pageCount": 99999999999999999999}}`,
	`[]`, `"x"`, `7`,
	// Not JSON.
	``, ` `, `{`, `{"Invoices": [}`, `{"Invoices": [{"InvoiceID": "x",}]}`, `{"Invoices": [],}`, `{"a" 1}`, `{"a":}`,
	`{} {}`, `{}x`, `{"a": 01}`, `{"a": 1.}`, `{"a": .5}`, `{"a": -}`, `{"a": +1}`, `{"a": 1e}`, `{"a": nul}`,
	`{"a": tru}`, `{"a": "\x"}`, `{"a": "\u12"}`, "{\"a\": \"\x01\"}", `{"a": "`, `{"a": [1 2]}`, `{'a': 1}`,
	"\xef\xbb\xbf{}", "{}\x00", `{"a": [` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]}`,
}

func TestDecodeInvoicesAgrees(t *testing.T) {
	for _, in := range agreeing {
		agree(t, []byte(in))
	}
}

func FuzzDecodeInvoices(f *testing.F) {
	b, err := os.ReadFile("testdata/invoices.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, in := range agreeing[:len(agreeing)-1] {
		f.Add([]byte(in))
	}
	f.Fuzz(agree)
}

func agree(t *testing.T, b []byte) {
	got, err := decodeInvoices(b, 3)
	want, werr := reference(b)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("%q:\n decodeInvoices: %v\n reflection: %v", b, err, werr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("%q:\n decodeInvoices: %+v\n reflection: %+v", b, got, want)
	}
}

// reference reads an answer by reflection into the wire shapes, with the
// JSON decoder the other adapters use.
func reference(b []byte) (invoices, error) {
	var body struct {
		Pagination *struct {
			PageCount int `json:"pageCount"`
		} `json:"pagination"`
		Invoices []struct {
			InvoiceID, InvoiceNumber, Type, Status string
			Contact                                contact
			Date, DueDate                          string
			Total, AmountDue                       refAmount
			AmountPaid, AmountCredited             refAmount
			CurrencyCode                           string
			FullyPaidOnDate, UpdatedDateUTC        string
			Payments                               []payment
			CreditNotes, Prepayments, Overpayments []jsontext.Value
		}
	}
	if err := upstream.DecodeJSON(b, &body); err != nil {
		return invoices{}, err
	}
	var out invoices
	if body.Pagination != nil {
		out.Pagination = &pagination{PageCount: body.Pagination.PageCount}
	}
	if body.Invoices != nil {
		out.Invoices = []invoice{}
	}
	for _, in := range body.Invoices {
		inv := invoice{InvoiceID: in.InvoiceID, InvoiceNumber: in.InvoiceNumber, Type: in.Type, Status: in.Status,
			Contact: in.Contact, Date: in.Date, DueDate: in.DueDate, Total: amount(in.Total), AmountDue: amount(in.AmountDue),
			AmountPaid: amount(in.AmountPaid), AmountCredited: amount(in.AmountCredited), CurrencyCode: in.CurrencyCode,
			FullyPaidOnDate: in.FullyPaidOnDate, UpdatedDateUTC: in.UpdatedDateUTC,
			CreditNotes: len(in.CreditNotes), Prepayments: len(in.Prepayments), Overpayments: len(in.Overpayments)}
		if len(in.Payments) > 0 { // decodeInvoices keeps no empty slice
			inv.Payments = in.Payments
		}
		out.Invoices = append(out.Invoices, inv)
	}
	return out, nil
}

// refAmount reads as amount did by reflection: a number as written, what
// a string holds, or null.
type refAmount string

func (a *refAmount) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	switch d.PeekKind() {
	case 'n', '"', '0':
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		*a = ""
		if tok.Kind() != 'n' {
			*a = refAmount(tok.String())
		}
		return nil
	}
	return fmt.Errorf("an amount is a number or a string")
}

// TestDecodeInvoicesErrors checks that a malformed answer says where.
func TestDecodeInvoicesErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"Invoices": [{"InvoiceID": "x"}, {"Contact": {"Name": 5}}]}`: `/Invoices/1/Contact/Name (offset 55): got a number, want a string`,
		`{"Invoices": [{"Total": {"Value": 1}}]}`:                      `/Invoices/0/Total (offset 24): got an object, want a number or a string`,
		`{"Invoices": [{"LineItems": [{"a": [1,]}]}]}`:                 `/Invoices/0/LineItems/0/a/1 (offset 38): invalid character ']', want a value`,
		`{"pagination": {"pageCount": 2.5}}`:                           `/pagination/pageCount (offset 29): got 2.5, want an integer`,
		`{"Invoices": []} {}`:                                          `offset 17: data after the answer`,
		`{"Invoices": [{"InvoiceNumber": "INV-1`:                       `/Invoices/0/InvoiceNumber (offset 38): unexpected end of JSON in a string`,
	} {
		_, err := decodeInvoices([]byte(in), 1)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", in, err, want)
		}
	}
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
				invs, err := decodeInvoices(body.b, 51)
				if err != nil {
					b.Fatal(err)
				}
				found := make([]upstream.Found[invoice], 50)
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
