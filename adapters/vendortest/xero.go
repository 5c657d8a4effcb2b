package vendortest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// XeroPayment is a payment applied to an invoice.
type XeroPayment struct {
	PaymentID   string
	Date        time.Time
	Amount      string // decimal, as Xero's JSON number
	Reference   string
	AccountName string
}

// XeroInvoice is a Xero invoice as the double keeps it. Amounts are
// decimal strings written into the JSON as numbers, the way Xero sends
// them ("46.0", "1607.13").
type XeroInvoice struct {
	InvoiceID, InvoiceNumber string
	Type                     string // ACCREC unless set
	Status                   string
	ContactID, ContactName   string
	Date, DueDate            time.Time
	Total, AmountDue         string
	AmountPaid               string
	CurrencyCode             string
	Payments                 []XeroPayment
	FullyPaidOn              time.Time
	Updated                  time.Time
	// Tenant is the organisation that keeps the invoice; empty, it is
	// served to every organisation that keeps none of its own.
	Tenant string
}

// Xero is a double of the Xero Accounting API's invoices and quotes under
// /api.xro/2.0: GET /Invoices with page, pageSize, IDs, where (Type only),
// order and If-Modified-Since; GET /Invoices/{id}; GET /Quotes with page,
// order and If-Modified-Since, 100 a page; GET /Quotes/{id}; a bearer token and the
// xero-tenant-id header required; pagination in the answer. Every request
// is checked against Xero's published Accounting API description
// (Violations; Conforms fails a test on any).
type Xero struct {
	URL      string // the API base, .../api.xro/2.0
	Token    string
	TenantID string
	Faults   Faults
	// Identity is Xero's identity service and GET /connections, on the
	// same server; its access tokens are accepted for the tenants their
	// consent reaches.
	Identity *Identity
	*conformance

	srv *httptest.Server

	mu       sync.Mutex
	invoices map[string]*XeroInvoice
	// keeping are the tenants with invoices of their own.
	keeping  map[string]bool
	quotes   map[string]*XeroQuote
	seq      int
	requests []string
}

// NewXero starts the double with token "xero-token" and a tenant id.
func NewXero() *Xero {
	x := &Xero{Token: "xero-token", TenantID: "aef86862-2015-4b6b-88bc-d89032cecc50", invoices: map[string]*XeroInvoice{},
		keeping: map[string]bool{}, conformance: newConformance(xeroDescription)}
	x.Identity = newIdentity(xeroIdentity, "xero-client")
	x.Identity.AddTenant(x.TenantID, "Demo Company (UK)")
	x.srv = httptest.NewServer(x.Identity.mount(x.conformance.wrap(x.Faults.wrap(http.HandlerFunc(x.serve)))))
	x.URL = x.srv.URL + "/api.xro/2.0"
	x.Identity.URL = x.srv.URL
	return x
}

// StartXero starts the double for t: it is closed when t ends, and t fails
// if any request it received broke Xero's published description.
func StartXero(t testing.TB) *Xero {
	t.Helper()
	x := NewXero()
	t.Cleanup(x.Close)
	x.Conforms(t)
	return x
}

// Requests lists "METHOD path?query [If-Modified-Since]" of every
// request that reached a tenant's invoices, oldest first: a full read
// (a backfill page) has no If-Modified-Since.
func (x *Xero) Requests() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.requests...)
}

// Close stops the server.
func (x *Xero) Close() { x.srv.Close() }

// AddInvoice stores an invoice.
func (x *Xero) AddInvoice(inv XeroInvoice) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if inv.Type == "" {
		inv.Type = "ACCREC"
	}
	if inv.AmountPaid == "" {
		inv.AmountPaid = "0.00"
	}
	x.invoices[inv.InvoiceID] = &inv
	if inv.Tenant != "" {
		x.keeping[inv.Tenant] = true
	}
}

// Pay applies a payment that settles the invoice in full, as a bookkeeper
// would in Xero.
func (x *Xero) Pay(invoiceID, reference string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	inv := x.invoices[invoiceID]
	x.seq++
	inv.Payments = append(inv.Payments, XeroPayment{
		PaymentID: fmt.Sprintf("99ea7f6b-c513-4066-bc27-%012d", x.seq), Date: at, Amount: inv.AmountDue, Reference: reference,
	})
	inv.AmountPaid, inv.AmountDue = inv.Total, "0.00"
	inv.Status, inv.FullyPaidOn, inv.Updated = "PAID", at, at
}

// AddLedgerPage stores n authorised invoices to one contact, dated
// 2 March 2026, every third of them paid: the page that the Xero adapter's
// decoding benchmark and bench/adapters both read, so their figures are
// about the same bytes.
func (x *Xero) AddLedgerPage(n int) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for i := range n {
		inv := XeroInvoice{InvoiceID: fmt.Sprintf("d4956132-ed94-4dd7-9eaa-%012d", i), InvoiceNumber: fmt.Sprintf("INV-%04d", i),
			Status: "AUTHORISED", ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble",
			Date: day, DueDate: day.AddDate(0, 0, 30), Total: "1607.13", AmountDue: "1607.13", CurrencyCode: "GBP", Updated: day}
		x.AddInvoice(inv)
		if i%3 == 0 {
			x.Pay(inv.InvoiceID, "Stripe payout", day.Add(time.Hour))
		}
	}
}

func msDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("/Date(%d+0000)/", t.UnixMilli())
}

func (x *Xero) json(inv *XeroInvoice) map[string]any {
	pays := []map[string]any{}
	for _, p := range inv.Payments {
		pays = append(pays, map[string]any{"PaymentID": p.PaymentID, "Date": msDate(p.Date), "Amount": json.Number(p.Amount),
			"Reference": p.Reference, "CurrencyRate": 1.0, "HasAccount": false, "HasValidationErrors": false})
	}
	m := map[string]any{
		"Type": inv.Type, "InvoiceID": inv.InvoiceID, "InvoiceNumber": inv.InvoiceNumber, "Reference": "",
		"Payments": pays, "CreditNotes": []any{}, "Prepayments": []any{}, "Overpayments": []any{},
		"AmountDue": json.Number(inv.AmountDue), "AmountPaid": json.Number(inv.AmountPaid), "AmountCredited": json.Number("0.00"),
		"CurrencyRate": 1.0, "HasErrors": false, "IsDiscounted": false, "HasAttachments": false,
		"Contact":    map[string]any{"ContactID": inv.ContactID, "Name": inv.ContactName},
		"DateString": inv.Date.Format("2006-01-02T15:04:05"), "Date": msDate(inv.Date),
		"DueDateString": inv.DueDate.Format("2006-01-02T15:04:05"), "DueDate": msDate(inv.DueDate),
		"Status": inv.Status, "LineAmountTypes": "Exclusive", "LineItems": []any{},
		"SubTotal": json.Number(inv.Total), "TotalTax": json.Number("0.00"), "Total": json.Number(inv.Total),
		"UpdatedDateUTC": msDate(inv.Updated), "CurrencyCode": inv.CurrencyCode,
	}
	if !inv.FullyPaidOn.IsZero() {
		m["FullyPaidOnDate"] = msDate(inv.FullyPaidOn)
	}
	return m
}

// AddTenant adds an organisation that consents from now on reach, beside
// TenantID ("Demo Company (UK)"). A tenant is served the invoices added
// for it (XeroInvoice.Tenant), or, when it has none, those of no tenant.
func (x *Xero) AddTenant(id, name string) { x.Identity.AddTenant(id, name) }

// ConnectionsURL is Xero's GET /connections on the double.
func (x *Xero) ConnectionsURL() string { return x.srv.URL + "/connections" }

// tenantAccess is how a Xero API double takes a request's token and
// xero-tenant-id: the fixed token reaches the one tenant, an access token
// of the identity service the tenants its consent reaches.
func tenantAccess(r *http.Request, fixed, tenantID string, id *Identity) (authenticated, reached bool) {
	tenant := r.Header.Get("xero-tenant-id")
	if r.Header.Get("Authorization") == "Bearer "+fixed {
		return true, tenant == tenantID
	}
	return id.reaches(bearer(r), tenant)
}

func (x *Xero) serve(w http.ResponseWriter, r *http.Request) {
	authenticated, reached := tenantAccess(r, x.Token, x.TenantID, x.Identity)
	if !authenticated {
		writeJSON(w, http.StatusUnauthorized, []byte(`{"Type":null,"Title":"Unauthorized","Status":401,"Detail":"AuthenticationUnsuccessful"}`))
		return
	}
	if !reached {
		writeJSON(w, http.StatusForbidden, []byte(`{"Type":null,"Title":"Forbidden","Status":403,"Detail":"AuthenticationUnsuccessful"}`))
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.requests = append(x.requests, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("If-Modified-Since")))
	if rest, ok := strings.CutPrefix(r.URL.Path, "/api.xro/2.0/Quotes"); ok && r.Method == http.MethodGet &&
		(rest == "" || strings.HasPrefix(rest, "/")) {
		x.serveQuotes(w, r, strings.TrimPrefix(rest, "/"))
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api.xro/2.0/Invoices")
	if !ok || r.Method != http.MethodGet {
		writeJSON(w, http.StatusNotFound, []byte(`{"ErrorNumber":404,"Type":"NotFoundException","Message":"The resource you're looking for cannot be found"}`))
		return
	}
	tenant := x.invoiceTenant(r.Header.Get("xero-tenant-id"))
	if id := strings.TrimPrefix(rest, "/"); id != "" {
		inv := x.invoices[id]
		if inv == nil || inv.Tenant != tenant {
			writeJSON(w, http.StatusNotFound, []byte(`{"ErrorNumber":404,"Type":"NotFoundException","Message":"The resource you're looking for cannot be found"}`))
			return
		}
		b, _ := json.Marshal(map[string]any{"Id": "resp", "Status": "OK", "ProviderName": "practicegw test",
			"DateTimeUTC": msDate(time.Now()), "Invoices": []any{x.json(inv)}})
		writeJSON(w, http.StatusOK, b)
		return
	}
	q := r.URL.Query()
	ids := sortedKeys(x.invoices)
	since, ok := listQuery(w, r, "InvoiceID ASC")
	if !ok {
		return
	}
	typ := ""
	if where := q.Get("where"); where != "" {
		v, ok := strings.CutPrefix(where, `Type=="`)
		if !ok {
			writeJSON(w, http.StatusBadRequest, []byte(`{"ErrorNumber":16,"Type":"QueryParseException","Message":"unsupported where"}`))
			return
		}
		typ = strings.TrimSuffix(v, `"`)
	}
	// Only the page's invoices are written out: with tens of thousands
	// that is most of an answer's time.
	var named map[string]bool
	if v := q.Get("IDs"); v != "" {
		named = map[string]bool{}
		for _, id := range strings.Split(v, ",") {
			named[strings.TrimSpace(id)] = true
		}
	}
	var matched []*XeroInvoice
	for _, id := range ids {
		inv := x.invoices[id]
		if named != nil && !named[id] {
			continue
		}
		if inv.Tenant == tenant && (typ == "" || inv.Type == typ) && (since.IsZero() || !inv.Updated.Before(since)) {
			matched = append(matched, inv)
		}
	}
	page, _ := strconv.Atoi(q.Get("page"))
	size, _ := strconv.Atoi(q.Get("pageSize"))
	if size <= 0 || size > 1000 {
		size = 100
	}
	if page < 1 {
		page = 1
	}
	start := min((page-1)*size, len(matched))
	end := min(start+size, len(matched))
	body := map[string]any{"Id": "resp", "Status": "OK", "ProviderName": "practicegw test", "DateTimeUTC": msDate(time.Now()),
		"pagination": map[string]int{"page": page, "pageSize": size, "pageCount": (len(matched) + size - 1) / size, "itemCount": len(matched)},
		"Invoices":   x.jsonAll(matched[start:end])}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

// invoiceTenant is whose invoices a tenant is served: its own, or when it
// keeps none, those of no tenant ("").
func (x *Xero) invoiceTenant(tenant string) string {
	if x.keeping[tenant] {
		return tenant
	}
	return ""
}

func (x *Xero) jsonAll(invs []*XeroInvoice) []any {
	out := make([]any, len(invs))
	for i, inv := range invs {
		out[i] = x.json(inv)
	}
	return out
}

// XeroWebhook is a webhook body with one event per invoice id; no ids
// makes the intent-to-receive payload.
func XeroWebhook(tenantID string, at time.Time, invoiceIDs ...string) []byte {
	events := []map[string]any{}
	for _, id := range invoiceIDs {
		events = append(events, map[string]any{
			"resourceUrl": "https://api.xero.com/api.xro/2.0/Invoices/" + id, "resourceId": id,
			"eventDateUtc": at.UTC().Format("2006-01-02T15:04:05.000"), "eventType": "UPDATE",
			"eventCategory": "INVOICE", "tenantId": tenantID, "tenantType": "ORGANISATION",
		})
	}
	b, _ := json.Marshal(map[string]any{"events": events, "firstEventSequence": 1, "lastEventSequence": max(len(events), 1),
		"entropy": "S0m3r4Nd0mt3xt"})
	return b
}

// SignXero is x-xero-signature: the base64 HMAC-SHA256 of the raw body
// under the webhook key.
func SignXero(key string, body []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}
