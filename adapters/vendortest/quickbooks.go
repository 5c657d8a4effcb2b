package vendortest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// QBInvoice is a QuickBooks Online invoice as the double keeps it.
// Amounts are decimal strings written as JSON numbers.
type QBInvoice struct {
	ID, DocNumber            string
	CustomerID, CustomerName string
	TxnDate, DueDate         time.Time
	Total, Balance           string
	Currency                 string // USD unless set
	// Payments are the ids of the payments applied to it.
	Payments []string
	Voided   bool
	Created  time.Time
	Updated  time.Time
	sync     int
	deleted  bool
}

// QBPayment is a payment applied to invoices.
type QBPayment struct {
	ID       string
	TxnDate  time.Time
	Method   string // the payment method's name ("Visa", "Check")
	RefNum   string
	Amount   string
	Invoices []string
	Created  time.Time
	Updated  time.Time
	deleted  bool
}

// QuickBooks is a double of QuickBooks Online's Accounting API v3 under
// /v3/company/{realmId}: GET query (the query language's subset `select *
// from <Entity> [where MetaData.LastUpdatedTime >= '<t>' | where Id in
// ('1',...) | where Id = '1'] [STARTPOSITION n] [MAXRESULTS n]`, at most
// 1,000 rows), GET invoice/{id}, estimate/{id}, payment/{id},
// customer/{id}, companyinfo/{realmId}, and GET
// cdc?entities=...&changedSince=... (30 days back at most, 1,000 objects
// at most, deleted entities as {"status":"Deleted"} with their Id and
// MetaData). It takes its fixed token or an access token of its identity
// service (Intuit's paths: /connect/oauth2, /oauth2/v1/tokens/bearer,
// /v2/oauth2/tokens/revoke; the callback names realmId) whose consent
// reached the realm, and answers refusals with Intuit's Fault bodies.
//
// Every answer it writes is checked against Intuit's published schemas
// (IntuitResponse and the entities in it), and every request it takes
// too: the entities a query, read or CDC names, the fields a query
// filters on and their values' types (Violations; Conforms fails a test on
// any).
type QuickBooks struct {
	URL           string // the API base, where /v3/company/... is
	Token         string
	RealmID       string
	VerifierToken string
	Faults        Faults
	// Identity is Intuit's identity service on the same server; its
	// consents reach RealmID.
	Identity *Identity
	*conformance

	srv    *httptest.Server
	schema *xsdSchema

	mu        sync.Mutex
	now       func() time.Time
	invoices  map[string]*QBInvoice
	payments  map[string]*QBPayment
	estimates map[string]*QBEstimate
	customers map[string]string // id -> display name
	seq       int
	requests  []string
	// notifyURL, period, batch and push tell the app's endpoint of
	// changes (NotifyEvery, quickbooks_notify.go).
	notifyURL string
	period    time.Duration
	batch     []QBEvent
	push      *pusher
}

// NewQuickBooks starts the double with token "qbo-token", a realm and a
// verifier token.
func NewQuickBooks() *QuickBooks {
	q := &QuickBooks{Token: "qbo-token", RealmID: "9130357992221046", VerifierToken: "qbo-verifier-token",
		now: time.Now, invoices: map[string]*QBInvoice{}, payments: map[string]*QBPayment{},
		estimates: map[string]*QBEstimate{}, customers: map[string]string{}}
	schema, err := qboSchema()
	q.schema = schema
	q.conformance = &conformance{loadErr: err, links: map[string]bool{}}
	if schema != nil {
		q.conformance.checker = qboRequests{schema}
	}
	q.Identity = newIdentity(intuitIdentity, "intuit-client")
	q.Identity.AddTenant(q.RealmID, "Birch Street CPAs")
	q.srv = httptest.NewServer(q.Identity.mount(q.conformance.wrap(q.Faults.wrap(http.HandlerFunc(q.serve)))))
	q.URL = q.srv.URL
	q.Identity.URL = q.srv.URL
	return q
}

// StartQuickBooks starts the double for t: closed when t ends, and t
// fails if any request it took or answer it gave broke Intuit's schemas.
func StartQuickBooks(t testing.TB) *QuickBooks {
	t.Helper()
	q := NewQuickBooks()
	t.Cleanup(q.Close)
	q.Conforms(t)
	return q
}

// Close stops the server, and the notifications it sends.
func (q *QuickBooks) Close() {
	q.mu.Lock()
	p := q.push
	q.mu.Unlock()
	p.stop()
	q.srv.Close()
}

// Handler is the double's handler, as its server runs it.
func (q *QuickBooks) Handler() http.Handler { return q.srv.Config.Handler }

// SetNow sets the clock the double stamps answers and changes with.
func (q *QuickBooks) SetNow(now func() time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.now = now
}

// Requests lists "GET path?query" of every API request, oldest first.
func (q *QuickBooks) Requests() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.requests)
}

// AddInvoice stores an invoice (and its customer).
func (q *QuickBooks) AddInvoice(inv QBInvoice) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if inv.Currency == "" {
		inv.Currency = "USD"
	}
	if inv.Balance == "" {
		inv.Balance = inv.Total
	}
	if inv.Created.IsZero() {
		inv.Created = inv.Updated
	}
	q.customers[inv.CustomerID] = inv.CustomerName
	q.invoices[inv.ID] = &inv
	q.told("Invoice", inv.ID, "Create", inv.Updated)
}

// Pay records a payment of an invoice's balance by method (a payment
// method's name) with a reference, as a bookkeeper would in QuickBooks;
// it returns the payment's id.
func (q *QuickBooks) Pay(invoiceID, method, ref string, at time.Time) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	inv := q.invoices[invoiceID]
	q.seq++
	id := strconv.Itoa(900000 + q.seq)
	q.payments[id] = &QBPayment{ID: id, TxnDate: at, Method: method, RefNum: ref, Amount: inv.Balance,
		Invoices: []string{invoiceID}, Created: at, Updated: at}
	inv.Payments = append(inv.Payments, id)
	inv.Balance, inv.Updated = "0.00", at
	inv.sync++
	q.told("Payment", id, "Create", at)
	q.told("Invoice", invoiceID, "Update", at)
	return id
}

// Change edits an invoice's total (and balance), as an edit would.
func (q *QuickBooks) Change(invoiceID, total string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	inv := q.invoices[invoiceID]
	inv.Total, inv.Balance, inv.Updated = total, total, at
	inv.sync++
	q.told("Invoice", invoiceID, "Update", at)
}

// Void voids an invoice: QuickBooks zeroes it and notes "Voided".
func (q *QuickBooks) Void(invoiceID string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	inv := q.invoices[invoiceID]
	inv.Voided, inv.Total, inv.Balance, inv.Updated = true, "0", "0", at
	inv.sync++
	q.told("Invoice", invoiceID, "Void", at)
}

// Delete deletes an invoice: reads no longer find it, and change data
// capture reports it as Deleted.
func (q *QuickBooks) Delete(invoiceID string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	inv := q.invoices[invoiceID]
	inv.deleted, inv.Updated = true, at
	inv.sync++
	q.told("Invoice", invoiceID, "Delete", at)
}

// qbFault is an Intuit Fault answer.
func qbFault(typ, code, message string) []byte {
	b, _ := json.Marshal(map[string]any{"Fault": map[string]any{"type": typ,
		"Error": []map[string]any{{"Message": message, "Detail": message + " (detail from the vendor)", "code": code, "element": ""}}},
		"time": time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")})
	return b
}

// QuickBooksThrottled is the body of Intuit's 429.
var QuickBooksThrottled = string(qbFault("ThrottleExceeded", "003001", "ThrottleExceeded"))

// QuickBooksFault is a Fault body of type typ (ValidationFault,
// AuthenticationFault, ...), for Faults.
func QuickBooksFault(typ, code, message string) string { return string(qbFault(typ, code, message)) }

func qbStamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func qbAmount(s string) json.Number {
	if s == "" {
		return json.Number("0")
	}
	return json.Number(s)
}

func (q *QuickBooks) invoiceJSON(inv *QBInvoice) map[string]any {
	meta := map[string]any{"CreateTime": qbStamp(inv.Created), "LastUpdatedTime": qbStamp(inv.Updated)}
	if inv.deleted {
		return map[string]any{"Id": inv.ID, "domain": "QBO", "status": "Deleted", "MetaData": meta}
	}
	links := []map[string]any{}
	for _, p := range inv.Payments {
		links = append(links, map[string]any{"TxnId": p, "TxnType": "Payment"})
	}
	m := map[string]any{
		"Id": inv.ID, "SyncToken": strconv.Itoa(inv.sync), "domain": "QBO", "sparse": false, "MetaData": meta,
		"DocNumber": inv.DocNumber, "TxnDate": inv.TxnDate.Format(time.DateOnly), "DueDate": inv.DueDate.Format(time.DateOnly),
		"CurrencyRef": map[string]any{"value": inv.Currency, "name": "United States Dollar"},
		"CustomerRef": map[string]any{"value": inv.CustomerID, "name": inv.CustomerName},
		"LinkedTxn":   links,
		"Line": []map[string]any{{"Id": "1", "LineNum": 1, "Amount": qbAmount(inv.Total), "DetailType": "SalesItemLineDetail",
			"SalesItemLineDetail": map[string]any{"ItemRef": map[string]any{"value": "1", "name": "Services"}}}},
		"TotalAmt": qbAmount(inv.Total), "Balance": qbAmount(inv.Balance), "EmailStatus": "NotSet",
	}
	if inv.Voided {
		m["PrivateNote"] = "Voided"
	}
	// QuickBooks leaves out what an invoice does not have.
	if inv.DueDate.IsZero() {
		delete(m, "DueDate")
	}
	if inv.DocNumber == "" {
		delete(m, "DocNumber")
	}
	return m
}

func (q *QuickBooks) paymentJSON(p *QBPayment) map[string]any {
	meta := map[string]any{"CreateTime": qbStamp(p.Created), "LastUpdatedTime": qbStamp(p.Updated)}
	if p.deleted {
		return map[string]any{"Id": p.ID, "domain": "QBO", "status": "Deleted", "MetaData": meta}
	}
	links := []map[string]any{}
	for _, id := range p.Invoices {
		links = append(links, map[string]any{"TxnId": id, "TxnType": "Invoice"})
	}
	m := map[string]any{"Id": p.ID, "SyncToken": "0", "domain": "QBO", "sparse": false, "MetaData": meta,
		"TxnDate": p.TxnDate.Format(time.DateOnly), "TotalAmt": qbAmount(p.Amount), "UnappliedAmt": json.Number("0"),
		"CurrencyRef": map[string]any{"value": "USD", "name": "United States Dollar"},
		"Line":        []map[string]any{{"Amount": qbAmount(p.Amount), "LinkedTxn": links}}, "ProcessPayment": false}
	if p.RefNum != "" {
		m["PaymentRefNum"] = p.RefNum
	}
	if p.Method != "" {
		m["PaymentMethodRef"] = map[string]any{"value": strconv.Itoa(len(p.Method)), "name": p.Method}
	}
	return m
}

func (q *QuickBooks) customerJSON(id string) map[string]any {
	return map[string]any{"Id": id, "SyncToken": "0", "domain": "QBO", "sparse": false, "DisplayName": q.customers[id],
		"Active": true, "Balance": json.Number("0"), "MetaData": map[string]any{"CreateTime": qbStamp(time.Unix(0, 0)),
			"LastUpdatedTime": qbStamp(time.Unix(0, 0))}}
}

// write answers with an IntuitResponse, checked against the schemas.
func (q *QuickBooks) write(w http.ResponseWriter, status int, body map[string]any) {
	body["time"] = qbStamp(q.now())
	b, _ := json.Marshal(body)
	if q.schema != nil {
		for _, p := range q.schema.checkJSON("IntuitResponse", b) {
			q.conformance.note("answer not in the schemas: " + p)
		}
	}
	writeJSON(w, status, b)
}

func (q *QuickBooks) fault(w http.ResponseWriter, status int, typ, code, message string) {
	var body map[string]any
	_ = json.Unmarshal(qbFault(typ, code, message), &body)
	q.write(w, status, body)
}

// access checks the token: the fixed one reaches RealmID, an identity
// service's the realm its consent chose.
func (q *QuickBooks) access(r *http.Request, realm string) (authenticated, reached bool) {
	if r.Header.Get("Authorization") == "Bearer "+q.Token {
		return true, realm == q.RealmID
	}
	return q.Identity.reaches(bearer(r), realm)
}

func (q *QuickBooks) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v3/company/")
	realm, op, _ := strings.Cut(rest, "/")
	if !ok || r.Method != http.MethodGet {
		q.fault(w, http.StatusNotFound, "ValidationFault", "4000", "Unsupported operation")
		return
	}
	authenticated, reached := q.access(r, realm)
	if !authenticated {
		q.fault(w, http.StatusUnauthorized, "AuthenticationFault", "3200", "message=AuthenticationFailed; errorCode=003200; statusCode=401")
		return
	}
	if !reached {
		q.fault(w, http.StatusForbidden, "AuthorizationFault", "003100", "ApplicationAuthorizationFailed")
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.requests = append(q.requests, r.Method+" "+r.URL.RequestURI())
	qs := r.URL.Query()
	switch entity, id, _ := strings.Cut(op, "/"); {
	case op == "query":
		q.query(w, qs.Get("query"))
	case op == "cdc":
		q.cdc(w, qs.Get("entities"), qs.Get("changedSince"))
	case entity == "companyinfo" && id == realm:
		q.companyInfo(w, realm)
	case id != "":
		q.read(w, entity, id)
	default:
		q.fault(w, http.StatusBadRequest, "ValidationFault", "4000", "Unsupported operation")
	}
}

// read is GET <entity>/<id>; q.mu is held.
func (q *QuickBooks) read(w http.ResponseWriter, entity, id string) {
	var body map[string]any
	switch entity {
	case "invoice":
		if inv := q.invoices[id]; inv != nil && !inv.deleted {
			body = map[string]any{"Invoice": q.invoiceJSON(inv)}
		}
	case "payment":
		if p := q.payments[id]; p != nil && !p.deleted {
			body = map[string]any{"Payment": q.paymentJSON(p)}
		}
	case "estimate":
		if e := q.estimates[id]; e != nil && !e.deleted {
			body = map[string]any{"Estimate": q.estimateJSON(e)}
		}
	case "customer":
		if _, ok := q.customers[id]; ok {
			body = map[string]any{"Customer": q.customerJSON(id)}
		}
	}
	if body == nil {
		q.fault(w, http.StatusBadRequest, "ValidationFault", "610", "Object Not Found")
		return
	}
	q.write(w, http.StatusOK, body)
}

// companyInfo is GET companyinfo/{realmId}: the company the token
// reaches, named as its identity service names it; q.mu is held.
func (q *QuickBooks) companyInfo(w http.ResponseWriter, realm string) {
	q.Identity.mu.Lock()
	name := q.Identity.tenantName(realm)
	q.Identity.mu.Unlock()
	if name == "" {
		name = "QuickBooks company " + realm
	}
	stamp := qbStamp(time.Unix(0, 0))
	q.write(w, http.StatusOK, map[string]any{"CompanyInfo": map[string]any{"Id": "1", "SyncToken": "0", "domain": "QBO",
		"sparse": false, "CompanyName": name, "Country": "US", "MetaData": map[string]any{"CreateTime": stamp, "LastUpdatedTime": stamp}}})
}

// qbQuery is the subset of Intuit's query language the double answers.
var qbQuery = regexp.MustCompile(`(?i)^select \* from (\w+)(?: where (.+?))?(?: startposition (\d+))?(?: maxresults (\d+))?$`)

var (
	qbWhereSince = regexp.MustCompile(`^MetaData\.LastUpdatedTime >= '([^']+)'$`)
	qbWhereIn    = regexp.MustCompile(`(?i)^Id in \(('[^']*'(?:\s*,\s*'[^']*')*)\)$`)
	qbWhereIs    = regexp.MustCompile(`^Id = '([^']*)'$`)
	// qbCondition is any one condition, as the request check reads it:
	// an element's path, an operator, a quoted value or a list of them.
	qbCondition = regexp.MustCompile(`(?i)^([\w.]+)\s*(?:(>=|<=|=|>|<|like)\s*'([^']*)'|in\s*\(([^)]*)\))$`)
)

// query answers a query; q.mu is held.
func (q *QuickBooks) query(w http.ResponseWriter, stmt string) {
	m := qbQuery.FindStringSubmatch(strings.TrimSpace(stmt))
	if m == nil {
		q.fault(w, http.StatusBadRequest, "ValidationFault", "4000", "QueryParserError: Encountered an unexpected token")
		return
	}
	entity, where := m[1], m[2]
	start, size := 1, 100
	if m[3] != "" {
		start, _ = strconv.Atoi(m[3])
	}
	if m[4] != "" {
		size, _ = strconv.Atoi(m[4])
	}
	if start < 1 || size < 1 || size > 1000 {
		q.fault(w, http.StatusBadRequest, "ValidationFault", "4000", "QueryValidationError: STARTPOSITION and MAXRESULTS")
		return
	}
	var since time.Time
	var ids []string
	switch {
	case where == "":
	case qbWhereSince.MatchString(where):
		t, err := time.Parse(time.RFC3339, qbWhereSince.FindStringSubmatch(where)[1])
		if err != nil {
			q.fault(w, http.StatusBadRequest, "ValidationFault", "4000", "QueryValidationError: a date-time")
			return
		}
		since = t
	case qbWhereIn.MatchString(where):
		for _, v := range strings.Split(qbWhereIn.FindStringSubmatch(where)[1], ",") {
			ids = append(ids, strings.Trim(strings.TrimSpace(v), "'"))
		}
	case qbWhereIs.MatchString(where):
		ids = []string{qbWhereIs.FindStringSubmatch(where)[1]}
	default:
		q.fault(w, http.StatusBadRequest, "ValidationFault", "4000", "QueryParserError: unsupported where")
		return
	}
	rows := q.rows(entity, since, ids)
	from := min(start-1, len(rows))
	page := rows[from:min(from+size, len(rows))]
	qr := map[string]any{"startPosition": start, "maxResults": len(page)}
	if len(page) > 0 {
		qr[entity] = page
	}
	q.write(w, http.StatusOK, map[string]any{"QueryResponse": qr})
}

// rows are an entity's live records in Id order, changed since since (if
// set), among ids (if any); q.mu is held.
func (q *QuickBooks) rows(entity string, since time.Time, ids []string) []map[string]any {
	var out []map[string]any
	keep := func(id string, updated time.Time) bool {
		return (since.IsZero() || !updated.Before(since)) && (len(ids) == 0 || slices.Contains(ids, id))
	}
	switch entity {
	case "Invoice":
		for _, id := range byNumber(q.invoices) {
			if inv := q.invoices[id]; !inv.deleted && keep(id, inv.Updated) {
				out = append(out, q.invoiceJSON(inv))
			}
		}
	case "Payment":
		for _, id := range byNumber(q.payments) {
			if p := q.payments[id]; !p.deleted && keep(id, p.Updated) {
				out = append(out, q.paymentJSON(p))
			}
		}
	case "Estimate":
		for _, id := range byNumber(q.estimates) {
			if e := q.estimates[id]; !e.deleted && keep(id, e.Updated) {
				out = append(out, q.estimateJSON(e))
			}
		}
	case "Customer":
		for _, id := range byNumber(q.customers) {
			if keep(id, time.Unix(0, 0)) {
				out = append(out, q.customerJSON(id))
			}
		}
	}
	return out
}

func byNumber[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return ids
}

// cdc answers change data capture; q.mu is held.
func (q *QuickBooks) cdc(w http.ResponseWriter, entities, changedSince string) {
	since, err := time.Parse(time.RFC3339, changedSince)
	if err != nil || entities == "" {
		q.fault(w, http.StatusBadRequest, "ValidationFault", "4000", "entities and changedSince are required")
		return
	}
	if q.now().Sub(since) > 30*24*time.Hour {
		q.fault(w, http.StatusBadRequest, "ValidationFault", "4000", "changedSince must be within the last 30 days")
		return
	}
	var answers []map[string]any
	total := 0
	for _, entity := range strings.Split(entities, ",") {
		var rows []map[string]any
		switch entity {
		case "Invoice":
			for _, id := range byNumber(q.invoices) {
				if inv := q.invoices[id]; !inv.Updated.Before(since) {
					rows = append(rows, q.invoiceJSON(inv))
				}
			}
		case "Payment":
			for _, id := range byNumber(q.payments) {
				if p := q.payments[id]; !p.Updated.Before(since) {
					rows = append(rows, q.paymentJSON(p))
				}
			}
		case "Estimate":
			for _, id := range byNumber(q.estimates) {
				if e := q.estimates[id]; !e.Updated.Before(since) {
					rows = append(rows, q.estimateJSON(e))
				}
			}
		}
		rows = rows[:min(len(rows), max(1000-total, 0))]
		total += len(rows)
		qr := map[string]any{"startPosition": 1, "maxResults": len(rows), "totalCount": len(rows)}
		if len(rows) > 0 {
			qr[entity] = rows
		}
		answers = append(answers, qr)
	}
	q.write(w, http.StatusOK, map[string]any{"CDCResponse": []map[string]any{{"QueryResponse": answers, "size": total}}})
}

// qboRequests checks the requests the double takes against the schemas:
// the entities they name are IntuitObject's, a query's filter names an
// element of the entity's type (through its path) and its values are of
// that element's type.
type qboRequests struct{ s *xsdSchema }

func (qboRequests) name() string { return "Intuit's schemas (" + qboSchemas + "/*.xsd)" }

func (c qboRequests) check(r *http.Request, _ []byte, _ bool) error {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v3/company/")
	if !ok {
		return nil // the identity service's paths
	}
	_, op, _ := strings.Cut(rest, "/")
	qs := r.URL.Query()
	var problems []string
	for name := range qs {
		if !slices.Contains([]string{"query", "entities", "changedSince", "minorversion"}, name) {
			problems = append(problems, fmt.Sprintf("query parameter %q is not Intuit's", name))
		}
	}
	if v := qs.Get("minorversion"); v != "" {
		if err := checkBuiltin("xs:int", json.Number(v)); err != nil {
			problems = append(problems, "minorversion: "+err.Error())
		}
	}
	switch entity, id, _ := strings.Cut(op, "/"); {
	case op == "query":
		problems = append(problems, c.query(qs.Get("query"))...)
	case op == "cdc":
		for _, e := range strings.Split(qs.Get("entities"), ",") {
			if !c.entity(e) {
				problems = append(problems, fmt.Sprintf("cdc entity %q is no IntuitObject", e))
			}
		}
		if err := checkBuiltin("xs:dateTime", qs.Get("changedSince")); err != nil {
			problems = append(problems, "changedSince: "+err.Error())
		}
	case id != "":
		// A read names its entity in lower case (invoice, companyinfo).
		if !slices.ContainsFunc(c.s.members["IntuitObject"], func(m string) bool { return strings.EqualFold(m, entity) }) {
			problems = append(problems, fmt.Sprintf("%q is no IntuitObject", entity))
		}
		var sub []string
		c.s.check("id", id, "id", &sub)
		problems = append(problems, sub...)
	default:
		problems = append(problems, "no operation "+op)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(problems, "; "))
}

func (c qboRequests) entity(name string) bool {
	return slices.Contains(c.s.members["IntuitObject"], name)
}

// query checks a query's entity and filter against the schemas.
func (c qboRequests) query(stmt string) []string {
	m := qbQuery.FindStringSubmatch(strings.TrimSpace(stmt))
	if m == nil {
		return []string{fmt.Sprintf("query %q is not the query language", stmt)}
	}
	entity, where := m[1], m[2]
	if !c.entity(entity) {
		return []string{fmt.Sprintf("query entity %q is no IntuitObject", entity)}
	}
	if where == "" {
		return nil
	}
	m = qbCondition.FindStringSubmatch(where)
	if m == nil {
		return []string{fmt.Sprintf("filter %q is not the query language", where)}
	}
	field, values := m[1], []string{m[3]}
	if m[3] == "" {
		values = nil
		for _, v := range strings.Split(m[4], ",") {
			values = append(values, strings.Trim(strings.TrimSpace(v), "'"))
		}
	}
	typ := c.s.elements[entity].typ
	for _, part := range strings.Split(field, ".") {
		ct := c.s.complex[typ]
		m, ok := xsdMember{}, ct != nil
		if ok {
			m, ok = c.s.member(ct, part)
		}
		if !ok {
			return []string{fmt.Sprintf("%s has no element %s", entity, field)}
		}
		typ = m.typ
	}
	var problems []string
	for _, v := range values {
		c.s.check(typ, v, entity+"."+field, &problems)
	}
	return problems
}

// QBEvent is an entity change a webhook names.
type QBEvent struct {
	Entity    string // Invoice, Estimate, Payment, Customer
	ID        string
	Operation string // Create, Update, Delete, Merge, Void, Emailed
	At        time.Time
}

// QuickBooksCloudEvents is a webhook body in the CloudEvents format: one
// event per change, typed qbo.<entity>.<operation>.v1, with an empty
// data.
func QuickBooksCloudEvents(realm string, events ...QBEvent) []byte {
	ops := map[string]string{"Create": "created", "Update": "updated", "Delete": "deleted", "Merge": "merged",
		"Void": "voided", "Emailed": "emailed"}
	out := []map[string]any{}
	for i, e := range events {
		out = append(out, map[string]any{"specversion": "1.0", "id": fmt.Sprintf("%s-%s-%d", e.ID, e.At.Format("150405"), i),
			"source": "intuit.dsnBgbseACLLRZNxo2dfc4evmEJdxde58xeeYcZliOU=", "type": "qbo." + strings.ToLower(e.Entity) + "." + ops[e.Operation] + ".v1",
			"datacontenttype": "application/json", "time": e.At.UTC().Format(time.RFC3339Nano),
			"intuitentityid": e.ID, "intuitaccountid": realm, "data": map[string]any{}})
	}
	b, _ := json.Marshal(out)
	return b
}

// QuickBooksLegacy is a webhook body in the legacy eventNotifications
// format.
func QuickBooksLegacy(realm string, events ...QBEvent) []byte {
	entities := []map[string]any{}
	for _, e := range events {
		entities = append(entities, map[string]any{"name": e.Entity, "id": e.ID, "operation": e.Operation,
			"lastUpdated": e.At.UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	b, _ := json.Marshal(map[string]any{"eventNotifications": []map[string]any{{"realmId": realm,
		"dataChangeEvent": map[string]any{"entities": entities}}}})
	return b
}

// SignQuickBooks is intuit-signature: the base64 HMAC-SHA256 of the raw
// body under the app's verifier token.
func SignQuickBooks(verifierToken string, body []byte) string {
	m := hmac.New(sha256.New, []byte(verifierToken))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Notify posts a signed webhook body to url, as Intuit does, and returns
// the status the receiver answered.
func (q *QuickBooks) Notify(url string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("intuit-signature", SignQuickBooks(q.VerifierToken, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
