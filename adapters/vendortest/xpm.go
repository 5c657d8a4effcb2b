package vendortest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const xpmDescription = "xero-practice-manager-v3.1.openapi.yaml"

// XPMContact is a contact of an XPM client.
type XPMContact struct {
	UUID, Name, Email, Phone, Mobile, Position string
	Primary, Deleted                           bool
}

// XPMClient is an XPM client as the double keeps it. Modified is the time
// XPM keeps and filters modifiedSince on, which its answers never carry.
type XPMClient struct {
	UUID, Name, FirstName, LastName string
	Email, Phone, Country           string
	BusinessStructure               string
	Prospect, Archived, Deleted     bool
	AccountManager, JobManager      string // staff uuids
	Contacts                        []XPMContact
	Modified                        time.Time
}

// XPMJob is an XPM job. Created is what job.api/list's date range
// selects on; a job with a Completed date is no longer current.
type XPMJob struct {
	ID, UUID, Name, ClientUUID, State, Type string
	Start, Due, Completed, Created          time.Time
	Manager, Partner                        string // staff uuids
	Notes                                   []string
}

// XPMStaff is a staff member.
type XPMStaff struct{ UUID, Name, Email string }

// XPMPayment is a payment of an invoice.
type XPMPayment struct {
	Amount    string
	Date      time.Time
	Reference string
}

// XPMInvoice is an XPM invoice; amounts are decimals written as JSON
// numbers. Archived invoices are only in invoice.api/list.
type XPMInvoice struct {
	ID, UUID, Status, ClientUUID, JobID string
	Date, Due                           time.Time
	Total, Paid, Outstanding            string
	Archived                            bool
	Payments                            []XPMPayment
}

// XPM is a double of Xero Practice Manager's API v3.1 (JSON) under
// /practicemanager/v3.1: clients (list with modifiedSince, paged-list with
// pageToken, get, add, update, archive, contacts), jobs (current, list by
// creation date, by client, get, add, update, state, note, assign), job
// states, categories, staff and invoices (current, draft, list by date,
// by job, get, payments) and quotes (current, draft, list by date, get,
// a job's createquote). A bearer token and the xero-tenant-id header
// are required. Every request is checked against XPM's published
// description (Violations; Conforms fails a test on any).
type XPM struct {
	URL   string // the API base, .../practicemanager
	Token string
	// Identity is Xero's identity service (XPM signs in through Xero),
	// on the same server; its access tokens are accepted for the tenants
	// their consent reaches.
	Identity *Identity
	TenantID string
	Faults   Faults
	*conformance

	srv *httptest.Server

	mu  sync.Mutex
	now func() time.Time
	// loc is the practice's zone, in which XPM reads and writes times
	// without a zone (modifiedSince); UTC unless SetZone.
	loc        *time.Location
	clients    map[string]*XPMClient
	jobs       map[string]*XPMJob
	staff      map[string]*XPMStaff
	invoices   map[string]*XPMInvoice
	quotes     map[string]*XPMQuote
	states     []string
	categories map[string]string // uuid -> name
	seq        int
	log        []string
}

// NewXPM starts the double with token "xpm-token", a tenant id, the job
// states Planned, In Progress, Awaiting info, Completed and Cancelled,
// and the categories Accounts and Tax.
func NewXPM() *XPM {
	x := &XPM{Token: "xpm-token", TenantID: "aef86862-2015-4b6b-88bc-d89032cecc50", now: time.Now, loc: time.UTC,
		clients: map[string]*XPMClient{}, jobs: map[string]*XPMJob{}, staff: map[string]*XPMStaff{},
		invoices: map[string]*XPMInvoice{}, quotes: map[string]*XPMQuote{}, states: []string{"Planned", "In Progress", "Awaiting info", "Completed", "Cancelled"},
		categories:  map[string]string{"5b5e8c54-5a2e-4b1c-9f1a-000000000001": "Accounts", "5b5e8c54-5a2e-4b1c-9f1a-000000000002": "Tax"},
		conformance: newConformance(xpmDescription)}
	x.Identity = newIdentity(xeroIdentity, "xero-client")
	x.Identity.AddTenant(x.TenantID, "Demo Practice")
	// A token of a consent is held to the scopes it was given.
	x.conformance.granted = func(r *http.Request) ([]string, bool) {
		g, ok := x.Identity.live(bearer(r))
		return strings.Fields(g.Scope), ok
	}
	x.srv = httptest.NewServer(x.Identity.mount(x.conformance.wrap(x.Faults.wrap(http.HandlerFunc(x.serve)))))
	x.URL = x.srv.URL + "/practicemanager"
	x.Identity.URL = x.srv.URL
	return x
}

// StartXPM starts the double for t: it is closed when t ends, and t fails
// if any request it received broke XPM's published description.
func StartXPM(t testing.TB) *XPM {
	t.Helper()
	x := NewXPM()
	t.Cleanup(x.Close)
	x.Conforms(t)
	return x
}

// Close stops the server.
func (x *XPM) Close() { x.srv.Close() }

// UseIdentity makes the API take the access tokens of id (the Xero
// double's: XPM signs in through Xero's identity service, and one consent
// reaches both) instead of its own identity's. Call it before any request.
func (x *XPM) UseIdentity(id *Identity) { x.Identity = id }

// SetZone sets the practice's time zone, in which the double reads the
// times XPM takes without a zone, as XPM does.
func (x *XPM) SetZone(loc *time.Location) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.loc = loc
}

// SetClock makes the double stamp modifications with now.
func (x *XPM) SetClock(now func() time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.now = now
}

// Requests lists the requests received so far, "GET /v3.1/...?...".
func (x *XPM) Requests() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.log...)
}

// AddClient stores a client; a zero Modified is now.
func (x *XPM) AddClient(c XPMClient) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if c.Modified.IsZero() {
		c.Modified = x.now()
	}
	x.clients[c.UUID] = &c
}

// EditClient changes a client as a user would in XPM.
func (x *XPM) EditClient(uuid string, edit func(*XPMClient)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.clients[uuid]
	edit(c)
	c.Modified = x.now()
}

// AddJob stores a job.
func (x *XPM) AddJob(j XPMJob) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.jobs[j.ID] = &j
}

// EditJob changes a job as a user would in XPM.
func (x *XPM) EditJob(id string, edit func(*XPMJob)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	edit(x.jobs[id])
}

// Job returns a copy of a job.
func (x *XPM) Job(id string) XPMJob {
	x.mu.Lock()
	defer x.mu.Unlock()
	return *x.jobs[id]
}

// AddJobState adds a job state after the practice's others, as a firm
// does in XPM's settings.
func (x *XPM) AddJobState(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.states = append(x.states, name)
}

// MoveJob changes a job's state as a user would in XPM's job screen: a
// Completed or Cancelled job gets a completed date (and leaves
// job.api/current), any other state clears it. XPM keeps no modification
// time on jobs, so nothing else changes.
func (x *XPM) MoveJob(id, state string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	j := x.jobs[id]
	j.State, j.Completed = state, time.Time{}
	if state == "Completed" || state == "Cancelled" {
		j.Completed = x.now()
	}
}

// Client returns a copy of a client.
func (x *XPM) Client(uuid string) XPMClient {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := *x.clients[uuid]
	c.Contacts = append([]XPMContact(nil), c.Contacts...)
	return c
}

// AddStaff stores a staff member.
func (x *XPM) AddStaff(s XPMStaff) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.staff[s.UUID] = &s
}

// AddInvoice stores an invoice.
func (x *XPM) AddInvoice(inv XPMInvoice) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.invoices[inv.ID] = &inv
}

// Pay settles an invoice in full with one payment.
func (x *XPM) Pay(id, reference string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	inv := x.invoices[id]
	inv.Payments = append(inv.Payments, XPMPayment{Amount: inv.Outstanding, Date: at, Reference: reference})
	inv.Paid, inv.Outstanding, inv.Status = inv.Total, "0.00", "Paid"
}

func xpmTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Format("2006-01-02T15:04:05")
}

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

func (x *XPM) party(uuid string) any {
	if s := x.staff[uuid]; s != nil {
		return map[string]any{"uuid": s.UUID, "name": s.Name}
	}
	return nil
}

func (x *XPM) clientJSON(c *XPMClient, contacts bool) map[string]any {
	m := map[string]any{"uuid": c.UUID, "name": c.Name, "firstName": c.FirstName, "lastName": c.LastName,
		"email": c.Email, "phone": c.Phone, "country": c.Country, "businessStructure": c.BusinessStructure,
		"isProspect": yesNo(c.Prospect), "isArchived": yesNo(c.Archived), "isDeleted": yesNo(c.Deleted),
		"accountManager": x.party(c.AccountManager), "jobManager": x.party(c.JobManager),
		"type":   map[string]any{"name": "Standard", "costMarkup": 0, "paymentTerm": "DayOfMonth", "paymentDay": 20},
		"webUrl": "https://app.practicemanager.xero.com/Client/" + c.UUID}
	if contacts {
		cs := []any{}
		for _, ct := range c.Contacts {
			cs = append(cs, map[string]any{"uuid": ct.UUID, "name": ct.Name, "email": ct.Email, "phone": ct.Phone,
				"mobile": ct.Mobile, "position": ct.Position, "isPrimary": yesNo(ct.Primary), "isDeleted": yesNo(ct.Deleted)})
		}
		m["contacts"] = cs
		m["notes"], m["groups"], m["relationships"] = []any{}, []any{}, []any{}
	}
	return m
}

func (x *XPM) jobJSON(j *XPMJob) map[string]any {
	var client any
	if c := x.clients[j.ClientUUID]; c != nil {
		client = map[string]any{"uuid": c.UUID, "name": c.Name}
	}
	return map[string]any{"id": j.ID, "uuid": j.UUID, "name": j.Name, "description": "", "client": client,
		"state": j.State, "type": j.Type, "startDate": xpmTime(j.Start), "dueDate": xpmTime(j.Due),
		"completedDate": xpmTime(j.Completed), "manager": x.party(j.Manager), "partner": x.party(j.Partner),
		"assigned": []any{}, "webUrl": "https://app.practicemanager.xero.com/Job/" + j.ID}
}

func (x *XPM) invoiceJSON(inv *XPMInvoice) map[string]any {
	var client any
	if c := x.clients[inv.ClientUUID]; c != nil {
		client = map[string]any{"uuid": c.UUID, "name": c.Name}
	}
	return map[string]any{"id": inv.ID, "uuid": inv.UUID, "type": "Progress Invoice", "status": inv.Status,
		"jobText": inv.JobID, "description": "", "date": xpmTime(inv.Date), "dueDate": xpmTime(inv.Due),
		"amount": json.Number(inv.Total), "amountTax": json.Number("0.00"), "amountIncludingTax": json.Number(inv.Total),
		"amountPaid": json.Number(inv.Paid), "amountOutstanding": json.Number(inv.Outstanding), "client": client}
}

// reply writes an OK answer with the members given.
func reply(w http.ResponseWriter, members map[string]any) {
	members["status"] = "OK"
	b, _ := json.Marshal(members)
	writeJSON(w, http.StatusOK, b)
}

func refuse(w http.ResponseWriter, status int, desc string) {
	b, _ := json.Marshal(map[string]any{"status": "ERROR", "errorDescription": desc})
	writeJSON(w, status, b)
}

func (x *XPM) serve(w http.ResponseWriter, r *http.Request) {
	authenticated, reached := tenantAccess(r, x.Token, x.TenantID, x.Identity)
	if !authenticated || !reached && r.Header.Get("Authorization") == "Bearer "+x.Token {
		refuse(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	if !reached {
		refuse(w, http.StatusForbidden, "Forbidden")
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	op, ok := strings.CutPrefix(r.URL.Path, "/practicemanager/v3.1/")
	x.log = append(x.log, r.Method+" "+strings.TrimPrefix(r.URL.RequestURI(), "/practicemanager"))
	if !ok {
		refuse(w, http.StatusNotFound, "Resource not found")
		return
	}
	var body map[string]any
	if r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			refuse(w, http.StatusBadRequest, "The request body is not JSON")
			return
		}
	}
	c := xpmCall{w: w, r: r, body: body, q: r.URL.Query()}
	for _, rt := range append(xpmRoutes, xpmQuoteRoutes...) {
		if rest, ok := rt.match(r.Method, op); ok {
			c.rest = rest
			rt.handle(x, c)
			return
		}
	}
	refuse(w, http.StatusNotFound, "Resource not found")
}

// xpmCall is one request to the XPM double, its JSON body read.
type xpmCall struct {
	w    http.ResponseWriter
	r    *http.Request
	body map[string]any
	q    url.Values
	// rest is what follows a route's prefix: the id in client.api/get/<id>.
	rest string
}

// str is a string member of the body, "" when absent.
func (c xpmCall) str(k string) string { s, _ := c.body[k].(string); return s }

// xpmRoute is one operation of XPM's API. An op ending in "/" is a prefix
// that an id follows.
type xpmRoute struct {
	method, op string
	handle     func(x *XPM, c xpmCall)
}

func (rt xpmRoute) match(method, op string) (rest string, ok bool) {
	if method != rt.method {
		return "", false
	}
	if strings.HasSuffix(rt.op, "/") {
		return strings.CutPrefix(op, rt.op)
	}
	return "", op == rt.op
}

// xpmRoutes are the operations the double answers, tried in order; any
// other is XPM's 404.
var xpmRoutes = []xpmRoute{
	{http.MethodGet, "client.api/list", (*XPM).listClients},
	{http.MethodGet, "client.api/paged-list", func(x *XPM, c xpmCall) { x.pagedClients(c.w, c.r) }},
	{http.MethodGet, "client.api/get/", (*XPM).getClient},
	{http.MethodPost, "client.api/add", (*XPM).addClient},
	{http.MethodPut, "client.api/update", (*XPM).updateClient},
	{http.MethodPut, "client.api/archive", (*XPM).archiveClient},
	{http.MethodPost, "client.api/contact", (*XPM).addContact},
	{http.MethodPut, "client.api/contact/", (*XPM).editContact},
	{http.MethodDelete, "client.api/contact/", (*XPM).editContact},
	{http.MethodGet, "job.api/current", func(x *XPM, c xpmCall) {
		x.jobList(c.w, func(j *XPMJob) bool { return j.Completed.IsZero() })
	}},
	{http.MethodGet, "job.api/list", (*XPM).listJobsCreated},
	{http.MethodGet, "job.api/client/", func(x *XPM, c xpmCall) {
		x.jobList(c.w, func(j *XPMJob) bool { return j.ClientUUID == c.rest })
	}},
	{http.MethodGet, "job.api/get/", (*XPM).getJob},
	{http.MethodPost, "job.api/add", (*XPM).addJob},
	{http.MethodPut, "job.api/update", (*XPM).updateJob},
	{http.MethodPut, "job.api/state", (*XPM).setJobState},
	{http.MethodPost, "job.api/note", (*XPM).addJobNote},
	{http.MethodPut, "job.api/assign", (*XPM).assignJob},
	{http.MethodGet, "jobstate.api/list", (*XPM).listJobStates},
	{http.MethodGet, "category.api/list", (*XPM).listCategories},
	{http.MethodGet, "staff.api/list", (*XPM).listStaff},
	{http.MethodGet, "staff.api/get/", (*XPM).getStaff},
	{http.MethodGet, "invoice.api/current", func(x *XPM, c xpmCall) {
		x.invoiceList(c.w, func(inv *XPMInvoice) bool { return inv.Status != "Draft" && !inv.Archived })
	}},
	{http.MethodGet, "invoice.api/draft", func(x *XPM, c xpmCall) {
		x.invoiceList(c.w, func(inv *XPMInvoice) bool { return inv.Status == "Draft" })
	}},
	{http.MethodGet, "invoice.api/list", (*XPM).listInvoicesDated},
	{http.MethodGet, "invoice.api/job/", func(x *XPM, c xpmCall) {
		x.invoiceList(c.w, func(inv *XPMInvoice) bool { return inv.JobID == c.rest })
	}},
	{http.MethodGet, "invoice.api/get/", (*XPM).getInvoice},
	{http.MethodGet, "invoice.api/payments/", (*XPM).listPayments},
}

// listClients answers client.api/list: every client, contacts included,
// or those modified since modifiedSince (XPM's local time).
func (x *XPM) listClients(c xpmCall) {
	var since time.Time
	if v := c.q.Get("modifiedSince"); v != "" {
		t, err := time.ParseInLocation("2006-01-02T15:04:05", v, x.loc)
		if err != nil {
			refuse(c.w, http.StatusBadRequest, "modifiedSince must be yyyy-MM-ddTHH:mm:ss")
			return
		}
		since = t
	}
	out := []any{}
	for _, id := range sortedKeys(x.clients) {
		if cl := x.clients[id]; since.IsZero() || !cl.Modified.Before(since) {
			out = append(out, x.clientJSON(cl, true))
		}
	}
	reply(c.w, map[string]any{"clients": out})
}

func (x *XPM) getClient(c xpmCall) {
	cl := x.clients[c.rest]
	if cl == nil || cl.Deleted {
		refuse(c.w, http.StatusNotFound, "Client not found")
		return
	}
	reply(c.w, map[string]any{"client": x.clientJSON(cl, true)})
}

func (x *XPM) addClient(c xpmCall) {
	if c.str("name") == "" {
		refuse(c.w, http.StatusBadRequest, "Name is required")
		return
	}
	x.seq++
	cl := &XPMClient{UUID: fmt.Sprintf("c0ffee00-0000-4000-8000-%012d", x.seq), Modified: x.now()}
	x.editClient(cl, c.body)
	for _, raw := range asList(c.body["contacts"]) {
		x.seq++
		cl.Contacts = append(cl.Contacts, contactFrom(fmt.Sprintf("c0a7ac70-0000-4000-8000-%012d", x.seq), raw))
	}
	x.clients[cl.UUID] = cl
	reply(c.w, map[string]any{"client": x.clientJSON(cl, true)})
}

// clientOrRefuse is the client uuid names, or nil after answering XPM's
// 404.
func (x *XPM) clientOrRefuse(c xpmCall, uuid string) *XPMClient {
	cl := x.clients[uuid]
	if cl == nil {
		refuse(c.w, http.StatusNotFound, "Client not found")
	}
	return cl
}

func (x *XPM) updateClient(c xpmCall) {
	cl := x.clientOrRefuse(c, c.str("uuid"))
	if cl == nil {
		return
	}
	x.editClient(cl, c.body)
	cl.Modified = x.now()
	reply(c.w, map[string]any{"client": x.clientJSON(cl, true)})
}

func (x *XPM) archiveClient(c xpmCall) {
	cl := x.clientOrRefuse(c, c.str("uuid"))
	if cl == nil {
		return
	}
	cl.Archived, cl.Modified = true, x.now()
	reply(c.w, map[string]any{})
}

func (x *XPM) addContact(c xpmCall) {
	ref, _ := c.body["client"].(map[string]any)
	uuid, _ := ref["uuid"].(string)
	cl := x.clientOrRefuse(c, uuid)
	if cl == nil {
		return
	}
	x.seq++
	ct := contactFrom(fmt.Sprintf("c0a7ac70-0000-4000-8000-%012d", x.seq), c.body)
	cl.Contacts, cl.Modified = append(cl.Contacts, ct), x.now()
	reply(c.w, map[string]any{"uuid": ct.UUID})
}

// editContact replaces (PUT) or deletes (DELETE) a contact of the client
// clientUuid names.
func (x *XPM) editContact(c xpmCall) {
	cl := x.clients[c.q.Get("clientUuid")]
	i := -1
	if cl != nil {
		i = slices.IndexFunc(cl.Contacts, func(ct XPMContact) bool { return ct.UUID == c.rest })
	}
	if i < 0 {
		refuse(c.w, http.StatusNotFound, "Contact not found")
		return
	}
	if c.r.Method == http.MethodDelete {
		cl.Contacts[i].Deleted = true
	} else {
		cl.Contacts[i] = contactFrom(c.rest, c.body)
	}
	cl.Modified = x.now()
	reply(c.w, map[string]any{})
}

// listJobsCreated answers job.api/list: the jobs created from one date to
// another, at most a year apart.
func (x *XPM) listJobsCreated(c xpmCall) {
	from, err1 := time.Parse("20060102", c.q.Get("from"))
	to, err2 := time.Parse("20060102", c.q.Get("to"))
	if err1 != nil || err2 != nil || to.Before(from) || to.Sub(from) > 366*24*time.Hour {
		refuse(c.w, http.StatusBadRequest, "from and to must be yyyyMMdd, at most a year apart")
		return
	}
	x.jobList(c.w, func(j *XPMJob) bool {
		d := j.Created.Truncate(24 * time.Hour)
		return !d.Before(from) && !d.After(to)
	})
}

// jobOrRefuse is the job id names, or nil after answering XPM's 404.
func (x *XPM) jobOrRefuse(c xpmCall, id string) *XPMJob {
	j := x.jobs[id]
	if j == nil {
		refuse(c.w, http.StatusNotFound, "Job not found")
	}
	return j
}

func (x *XPM) getJob(c xpmCall) {
	if j := x.jobOrRefuse(c, c.rest); j != nil {
		reply(c.w, map[string]any{"job": x.jobJSON(j)})
	}
}

func (x *XPM) addJob(c xpmCall) {
	if x.clients[c.str("clientUuid")] == nil {
		refuse(c.w, http.StatusBadRequest, "Client not found")
		return
	}
	x.seq++
	j := &XPMJob{ID: fmt.Sprintf("J%06d", 900000+x.seq), UUID: fmt.Sprintf("10b00000-0000-4000-8000-%012d", x.seq),
		ClientUUID: c.str("clientUuid"), State: x.states[0], Created: x.now()}
	if err := x.editJob(j, c.body); err != "" {
		refuse(c.w, http.StatusBadRequest, err)
		return
	}
	x.jobs[j.ID] = j
	reply(c.w, map[string]any{"job": x.jobJSON(j)})
}

func (x *XPM) updateJob(c xpmCall) {
	j := x.jobOrRefuse(c, c.str("id"))
	if j == nil {
		return
	}
	if err := x.editJob(j, c.body); err != "" {
		refuse(c.w, http.StatusBadRequest, err)
		return
	}
	reply(c.w, map[string]any{"job": x.jobJSON(j)})
}

// setJobState moves a job to one of the practice's states; Completed and
// Cancelled complete it, any other reopens it.
func (x *XPM) setJobState(c xpmCall) {
	j := x.jobOrRefuse(c, c.str("id"))
	if j == nil {
		return
	}
	if !slices.Contains(x.states, c.str("state")) {
		refuse(c.w, http.StatusBadRequest, "Invalid job state")
		return
	}
	j.State = c.str("state")
	j.Completed = time.Time{}
	if j.State == "Completed" || j.State == "Cancelled" {
		j.Completed = x.now()
	}
	reply(c.w, map[string]any{"job": x.jobJSON(j)})
}

func (x *XPM) addJobNote(c xpmCall) {
	j := x.jobOrRefuse(c, c.str("job"))
	if j == nil {
		return
	}
	j.Notes = append(j.Notes, c.str("title")+": "+c.str("text"))
	reply(c.w, map[string]any{"job": x.jobJSON(j)})
}

// assignJob makes a staff member the job's manager (add-manager).
func (x *XPM) assignJob(c xpmCall) {
	j := x.jobOrRefuse(c, c.str("id"))
	if j == nil {
		return
	}
	if m, ok := c.body["add-manager"].(map[string]any); ok {
		uuid, _ := m["uuid"].(string)
		if x.staff[uuid] == nil {
			refuse(c.w, http.StatusBadRequest, "Staff member not found")
			return
		}
		j.Manager = uuid
	}
	reply(c.w, map[string]any{"job": x.jobJSON(j)})
}

func (x *XPM) listJobStates(c xpmCall) {
	out := []any{}
	for i, s := range x.states {
		out = append(out, map[string]any{"uuid": fmt.Sprintf("57a7e000-0000-4000-8000-%012d", i), "name": s})
	}
	reply(c.w, map[string]any{"jobStates": out})
}

func (x *XPM) listCategories(c xpmCall) {
	out := []any{}
	for _, id := range sortedKeys(x.categories) {
		out = append(out, map[string]any{"uuid": id, "name": x.categories[id]})
	}
	reply(c.w, map[string]any{"categories": out})
}

func (x *XPM) listStaff(c xpmCall) {
	out := []any{}
	for _, id := range sortedKeys(x.staff) {
		s := x.staff[id]
		out = append(out, map[string]any{"uuid": s.UUID, "name": s.Name, "email": s.Email})
	}
	reply(c.w, map[string]any{"staffList": out})
}

func (x *XPM) getStaff(c xpmCall) {
	s := x.staff[c.rest]
	if s == nil {
		refuse(c.w, http.StatusNotFound, "Staff member not found")
		return
	}
	reply(c.w, map[string]any{"staff": map[string]any{"uuid": s.UUID, "name": s.Name, "email": s.Email}})
}

// listInvoicesDated answers invoice.api/list: the invoices, drafts aside,
// dated from one date to another.
func (x *XPM) listInvoicesDated(c xpmCall) {
	from, err1 := time.Parse("20060102", c.q.Get("from"))
	to, err2 := time.Parse("20060102", c.q.Get("to"))
	if err1 != nil || err2 != nil || to.Before(from) {
		refuse(c.w, http.StatusBadRequest, "from and to must be yyyyMMdd")
		return
	}
	x.invoiceList(c.w, func(inv *XPMInvoice) bool {
		d := inv.Date.Truncate(24 * time.Hour)
		return inv.Status != "Draft" && !d.Before(from) && !d.After(to)
	})
}

// invoiceOrRefuse is the invoice id names, or nil after answering XPM's
// 404.
func (x *XPM) invoiceOrRefuse(c xpmCall, id string) *XPMInvoice {
	inv := x.invoices[id]
	if inv == nil {
		refuse(c.w, http.StatusNotFound, "Invoice not found")
	}
	return inv
}

func (x *XPM) getInvoice(c xpmCall) {
	if inv := x.invoiceOrRefuse(c, c.rest); inv != nil {
		reply(c.w, map[string]any{"invoice": x.invoiceJSON(inv)})
	}
}

func (x *XPM) listPayments(c xpmCall) {
	inv := x.invoiceOrRefuse(c, c.rest)
	if inv == nil {
		return
	}
	out := []any{}
	for _, p := range inv.Payments {
		out = append(out, map[string]any{"amount": json.Number(p.Amount), "date": xpmTime(p.Date), "reference": p.Reference})
	}
	reply(c.w, map[string]any{"payments": out})
}

// pagedClients answers client.api/paged-list: non-archived, non-deleted
// clients in uuid order, without contacts, pageSize at a time, the next
// page named by an opaque pageToken in pagination.links.next.
func (x *XPM) pagedClients(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	size := 50
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			refuse(w, http.StatusBadRequest, "pageSize must be between 1 and 1000")
			return
		}
		size = n
	}
	start := 0
	if tok := q.Get("pageToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "after:"))
		if err != nil || err2 != nil || n < 0 {
			refuse(w, http.StatusBadRequest, "Invalid pageToken")
			return
		}
		start = n
	}
	var ids []string
	for _, id := range sortedKeys(x.clients) {
		if c := x.clients[id]; !c.Archived && !c.Deleted {
			ids = append(ids, id)
		}
	}
	start = min(start, len(ids))
	end := min(start+size, len(ids))
	out := []any{}
	for _, id := range ids[start:end] {
		out = append(out, x.clientJSON(x.clients[id], false))
	}
	links := map[string]any{"first": x.URL + "/v3.1/client.api/paged-list?pageSize=" + strconv.Itoa(size)}
	if end < len(ids) {
		next := x.URL + "/v3.1/client.api/paged-list?pageSize=" + strconv.Itoa(size) + "&pageToken=" +
			base64.RawURLEncoding.EncodeToString([]byte("after:"+strconv.Itoa(end)))
		links["next"] = next
		x.conformance.handOut(next)
	}
	reply(w, map[string]any{"clients": out, "pagination": map[string]any{"links": links}})
}

func (x *XPM) jobList(w http.ResponseWriter, keep func(*XPMJob) bool) {
	out := []any{}
	for _, id := range sortedKeys(x.jobs) {
		if j := x.jobs[id]; keep(j) {
			out = append(out, x.jobJSON(j))
		}
	}
	reply(w, map[string]any{"jobs": out})
}

func (x *XPM) invoiceList(w http.ResponseWriter, keep func(*XPMInvoice) bool) {
	out := []any{}
	for _, id := range sortedKeys(x.invoices) {
		if inv := x.invoices[id]; keep(inv) {
			out = append(out, x.invoiceJSON(inv))
		}
	}
	reply(w, map[string]any{"invoices": out})
}

func (x *XPM) editClient(c *XPMClient, body map[string]any) {
	for k, dst := range map[string]*string{"name": &c.Name, "email": &c.Email, "phone": &c.Phone, "country": &c.Country,
		"businessStructure": &c.BusinessStructure, "accountManagerUuid": &c.AccountManager, "firstName": &c.FirstName,
		"lastName": &c.LastName} {
		if v, ok := body[k].(string); ok {
			*dst = v
		}
	}
	if v, ok := body["isProspect"].(string); ok {
		c.Prospect = v == "Yes"
	}
}

// editJob applies a job add or update; it answers what XPM would refuse.
func (x *XPM) editJob(j *XPMJob, body map[string]any) string {
	if v, ok := body["name"].(string); ok {
		j.Name = v
	}
	for k, dst := range map[string]*time.Time{"startDate": &j.Start, "dueDate": &j.Due} {
		if v, ok := body[k].(string); ok {
			t, err := time.Parse("20060102", v)
			if err != nil {
				return k + " must be yyyyMMdd"
			}
			*dst = t
		}
	}
	if v, ok := body["categoryUuid"].(string); ok {
		name, ok := x.categories[v]
		if !ok {
			return "Category not found"
		}
		j.Type = name
	}
	if j.Name == "" {
		return "Name is required"
	}
	return ""
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func contactFrom(uuid string, raw any) XPMContact {
	m, _ := raw.(map[string]any)
	s := func(k string) string { v, _ := m[k].(string); return v }
	return XPMContact{UUID: uuid, Name: s("name"), Email: s("email"), Phone: s("phone"), Mobile: s("mobile"),
		Position: s("position"), Primary: s("isPrimary") == "Yes"}
}

// xpmPagedClients follows client.api/paged-list's pageToken links from the
// first page and returns the uuids in order, failing t on a repeat.
func xpmPagedClients(t testing.TB, x *XPM, pageSize int) []string {
	t.Helper()
	link := x.URL + "/v3.1/client.api/paged-list?pageSize=" + strconv.Itoa(pageSize)
	var ids []string
	seen := map[string]bool{}
	for range 10000 {
		req, _ := http.NewRequest(http.MethodGet, link, nil)
		req.Header.Set("Authorization", "Bearer "+x.Token)
		req.Header.Set("xero-tenant-id", x.TenantID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Clients    []struct{ UUID string }
			Pagination struct{ Links struct{ Next string } }
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Clients {
			if seen[c.UUID] {
				t.Fatalf("paged-list: %s twice", c.UUID)
			}
			seen[c.UUID] = true
			ids = append(ids, c.UUID)
		}
		if page.Pagination.Links.Next == "" {
			return ids
		}
		if _, err := url.Parse(page.Pagination.Links.Next); err != nil {
			t.Fatal(err)
		}
		link = page.Pagination.Links.Next
	}
	t.Fatal("paged-list never ended")
	return nil
}
