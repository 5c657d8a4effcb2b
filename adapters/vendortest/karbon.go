package vendortest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// KarbonContact is a Karbon contact (a person), as the double keeps it.
type KarbonContact struct {
	ContactKey, FirstName, LastName string
	ContactType                     string
	Email, Phone, Country, Role     string
	// OwnerKey is the user in the ClientOwner role of the client team.
	OwnerKey string
	// OrganizationKey links a contact to an organization's contacts.
	OrganizationKey string
	// ExternalKey is the linked ledger's contact id (Xero ContactID).
	ExternalKey  string
	LastModified time.Time
}

// KarbonOrganization is a Karbon organization.
type KarbonOrganization struct {
	OrganizationKey, FullName, ContactType string
	EntityType                             string
	Email, Phone, Country                  string
	OwnerKey                               string
	ExternalKey                            string
	LastModified                           time.Time
}

// KarbonClientGroup is a Karbon client group.
type KarbonClientGroup struct {
	ClientGroupKey, FullName, ContactType, PrimaryContact string
	OwnerKey                                              string
	LastModified                                          time.Time
}

// KarbonUser is a user of the firm's Karbon.
type KarbonUser struct {
	Id, Name, EmailAddress string
	Roles                  []string
}

// KarbonWorkItem is a Karbon work item in its published wire shape.
type KarbonWorkItem struct {
	WorkItemKey          string
	AssigneeEmailAddress string
	AssigneeKey          string
	AssigneeName         string
	Title                string
	ClientKey            string
	ClientName           string
	ClientType           string
	StartDate            string
	DueDate              string  `json:",omitempty"`
	DeadlineDate         *string `json:"DeadlineDate"`
	CompletedDate        string  `json:",omitempty"`
	WorkType             string
	WorkStatus           string
	PrimaryStatus        string
	SecondaryStatus      string
	Description          string `json:",omitempty"`
}

// KarbonStatus is a primary work status and its secondary statuses, as in
// TenantSettings.
type KarbonStatus struct {
	Primary     string
	Secondaries []string
}

// defaultKarbonStatuses are the five primary statuses with secondaries a
// firm might define.
var defaultKarbonStatuses = []KarbonStatus{
	{Primary: "Planned"},
	{Primary: "ReadyToStart"},
	{Primary: "InProgress", Secondaries: []string{"In Review", "Awaiting client approval"}},
	{Primary: "Waiting", Secondaries: []string{"Waiting on client"}},
	{Primary: "Completed", Secondaries: []string{"Filed", "Cancelled"}},
}

// Karbon is a double of Karbon API v3 under /v3: contacts, organizations,
// client groups, work items, users, tenant settings, notes, invoices and
// payments (karbon_billing.go) and webhook subscriptions (one per type and access key), with OData
// paging ($top at most 100, $skip, @odata.nextLink), the documented
// $filter subset, $expand of a record's related parts, Bearer plus
// AccessKey authentication, and Karbon's error bodies. Every request is
// checked against Karbon's published description (Violations; Conforms
// fails a test on any).
type Karbon struct {
	URL       string
	Bearer    string
	AccessKey string
	Faults    Faults
	*conformance

	srv *httptest.Server

	mu       sync.Mutex
	now      func() time.Time
	seq      int
	contacts map[string]*KarbonContact
	orgs     map[string]*KarbonOrganization
	groups   map[string]*KarbonClientGroup
	users    map[string]*KarbonUser
	work     map[string]*KarbonWorkItem
	statuses []KarbonStatus
	notes    []map[string]any
	requests []string
	loop     bool
	// pathFaults are faults scripted for requests to one path alone.
	pathFaults map[string][]Fault
	// rows are list answers' rows by collection, kept until a record
	// changes when KeepListRows is on (karbon_rows.go).
	rows     map[string][]map[string]any
	keepRows bool
	// accessKeys are the firms' access keys let in beside AccessKey.
	accessKeys map[string]bool
	// subs are the webhook subscriptions, by access key and type
	// (karbon_webhooks.go).
	subs map[string]map[string]*KarbonSubscription
	// invoices and payments are the firm's billing (karbon_billing.go).
	invoices map[string]*KarbonInvoice
	payments []*KarbonInvoicePayment
	// lost are payments an invoice lists whose own read answers 404.
	lost map[string]bool
	// window, pending and push tell subscriptions of changes
	// (NotifyChanges, karbon_webhooks.go).
	notifying    bool
	window       time.Duration
	pending      map[string]*karbonTold
	pendingOrder []string
	push         *pusher
}

// NewKarbon starts the double with credentials "bearer-token" and
// "access-key". Close it when done.
func NewKarbon() *Karbon {
	k := &Karbon{
		Bearer:      "bearer-token",
		AccessKey:   "access-key",
		now:         func() time.Time { return time.Now().UTC().Truncate(time.Second) },
		contacts:    map[string]*KarbonContact{},
		orgs:        map[string]*KarbonOrganization{},
		groups:      map[string]*KarbonClientGroup{},
		users:       map[string]*KarbonUser{},
		work:        map[string]*KarbonWorkItem{},
		statuses:    defaultKarbonStatuses,
		conformance: newConformance(karbonDescription),
	}
	k.srv = httptest.NewServer(k.conformance.wrap(k.Faults.wrap(http.HandlerFunc(k.serve))))
	k.URL = k.srv.URL
	return k
}

// StartKarbon starts the double for t: it is closed when t ends, and t
// fails if any request it received broke Karbon's published description.
func StartKarbon(t testing.TB) *Karbon {
	t.Helper()
	k := NewKarbon()
	t.Cleanup(k.Close)
	k.Conforms(t)
	return k
}

// Close stops the server, and the notifications it sends.
func (k *Karbon) Close() {
	k.mu.Lock()
	p := k.push
	k.mu.Unlock()
	p.stop()
	k.srv.Close()
}

// SetNow sets the double's clock, which stamps the changes it makes (an
// invoice's UpdatedAt).
func (k *Karbon) SetNow(now func() time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.now = now
}

// LoopNextLinks makes every list answer's @odata.nextLink point at the
// page just served, as a vendor fault that would have a client read the
// same page for ever.
func (k *Karbon) LoopNextLinks(on bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.loop = on
}

// FaultOn scripts the next requests to path (such as
// "/v3/WorkItems/W0001"), one fault each, leaving requests to other paths
// alone: a test can fail one read while a background sync keeps reading.
// A fault's Status and Body answer instead of serving (Delay is not
// applied).
func (k *Karbon) FaultOn(path string, fs ...Fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pathFaults == nil {
		k.pathFaults = map[string][]Fault{}
	}
	k.pathFaults[path] = append(k.pathFaults[path], fs...)
}

// pathFault takes the next fault scripted for path, if any.
func (k *Karbon) pathFault(path string) (Fault, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fs := k.pathFaults[path]
	if len(fs) == 0 {
		return Fault{}, false
	}
	k.pathFaults[path] = fs[1:]
	return fs[0], true
}

// RemoveWorkItem deletes a work item, as a user would in Karbon.
func (k *Karbon) RemoveWorkItem(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	delete(k.work, key)
	k.told("Work", key, "Deleted")
}

// RemoveContact and RemoveOrganization delete a contact or an
// organization, as a user would in Karbon.
func (k *Karbon) RemoveContact(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	delete(k.contacts, key)
	k.told("Contact", key, "Deleted")
}

func (k *Karbon) RemoveOrganization(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	delete(k.orgs, key)
	k.told("Contact", key, "Deleted")
}

// Requests lists "METHOD path?query" of every authenticated request.
func (k *Karbon) Requests() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.requests...)
}

// Notes are the notes posted so far.
func (k *Karbon) Notes() []map[string]any {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]map[string]any(nil), k.notes...)
}

// AddUser, AddContact, AddOrganization, AddClientGroup and AddWorkItem put
// records in the double.
func (k *Karbon) AddUser(u KarbonUser) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	k.users[u.Id] = &u
	k.told("User", u.Id, "Inserted")
}

func (k *Karbon) AddContact(c KarbonContact) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	if c.LastModified.IsZero() {
		c.LastModified = k.now()
	}
	k.contacts[c.ContactKey] = &c
	k.told("Contact", c.ContactKey, "Inserted")
}

func (k *Karbon) AddOrganization(o KarbonOrganization) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	if o.LastModified.IsZero() {
		o.LastModified = k.now()
	}
	k.orgs[o.OrganizationKey] = &o
	k.told("Contact", o.OrganizationKey, "Inserted")
}

func (k *Karbon) AddClientGroup(g KarbonClientGroup) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	if g.LastModified.IsZero() {
		g.LastModified = k.now()
	}
	k.groups[g.ClientGroupKey] = &g
	k.told("Contact", g.ClientGroupKey, "Inserted")
}

func (k *Karbon) AddWorkItem(w KarbonWorkItem) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	k.fillWork(&w)
	k.work[w.WorkItemKey] = &w
	k.told("Work", w.WorkItemKey, "Inserted")
}

// WorkItem returns a copy of a work item.
func (k *Karbon) WorkItem(key string) (KarbonWorkItem, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	w, ok := k.work[key]
	if !ok {
		return KarbonWorkItem{}, false
	}
	return *w, true
}

// MoveWorkItem changes a work item's status, as a user would in Karbon.
func (k *Karbon) MoveWorkItem(key, primary, secondary string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	w := k.work[key]
	w.PrimaryStatus, w.SecondaryStatus = primary, secondary
	w.WorkStatus = ""
	k.fillWork(w)
	k.told("Work", key, "Updated")
}

func (k *Karbon) fillWork(w *KarbonWorkItem) {
	w.WorkStatus = w.PrimaryStatus
	if w.SecondaryStatus != "" {
		w.WorkStatus = spaced(w.PrimaryStatus) + " - " + w.SecondaryStatus
	}
	if u := k.users[w.AssigneeKey]; u != nil {
		w.AssigneeEmailAddress, w.AssigneeName = u.EmailAddress, u.Name
	}
	if w.ClientName == "" {
		w.ClientName = k.clientName(w.ClientKey)
	}
}

// spaced writes "ReadyToStart" as "Ready To Start", as WorkStatus does.
func spaced(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (k *Karbon) clientName(key string) string {
	if c := k.contacts[key]; c != nil {
		return c.FirstName + " " + c.LastName
	}
	if o := k.orgs[key]; o != nil {
		return o.FullName
	}
	if g := k.groups[key]; g != nil {
		return g.FullName
	}
	return ""
}

// SignKarbon is the Signature header Karbon sends with a subscription's
// SigningKey: the hex HMAC-SHA256 of the raw body.
func SignKarbon(key string, body []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// KarbonWebhook is the body Karbon posts for a changed resource.
func KarbonWebhook(resourceType, key, action string, at time.Time) []byte {
	b, _ := json.Marshal(map[string]string{
		"ResourcePermaKey": key, "ResourceType": resourceType, "ActionType": action,
		"TimeStamp": at.UTC().Format(time.RFC3339),
	})
	return b
}
