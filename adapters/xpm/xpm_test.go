package xpm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/practice"
)

var (
	live  = practice.Tenant{Firm: "frm_acme"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

type sink struct {
	mu      sync.Mutex
	changes []practice.Change
}

func (s *sink) Publish(_ context.Context, c practice.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, c)
	return nil
}

func (s *sink) all() []practice.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]practice.Change(nil), s.changes...)
}

func staffID(i int) string  { return fmt.Sprintf("57aff000-0000-4000-8000-%012d", i) }
func clientID(i int) string { return fmt.Sprintf("c11e0000-0000-4000-8000-%012d", i) }

// fixture is a practice of 3 staff, 30 clients (every tenth archived, one
// deleted, every seventh a prospect), 40 current jobs, 15 completed last
// year and 5 created three years ago, and invoices: 10 current (every
// third paid), 3 drafts and 4 archived and paid.
func fixture(t *testing.T) *vendortest.XPM {
	t.Helper()
	x := vendortest.StartXPM(t)
	x.SetClock(func() time.Time { return epoch })
	for i := range 3 {
		x.AddStaff(vendortest.XPMStaff{UUID: staffID(i), Name: fmt.Sprintf("Staff %d", i), Email: fmt.Sprintf("s%d@firm.example", i)})
	}
	for i := range 30 {
		c := vendortest.XPMClient{UUID: clientID(i), Name: fmt.Sprintf("Client %02d Ltd", i), Email: "books@client.example",
			Country: "United Kingdom", BusinessStructure: "Limited Company", AccountManager: staffID(i % 3),
			Archived: i%10 == 9, Deleted: i == 28, Prospect: i%7 == 6, Modified: epoch.AddDate(0, -1, 0),
			Contacts: []vendortest.XPMContact{{UUID: fmt.Sprintf("c0a7ac70-0000-4000-8000-%012d", i), Name: "Ann Director",
				Position: "Director", Primary: true, Email: "ann@client.example"}}}
		if i%5 == 0 {
			c.AccountManager, c.JobManager, c.BusinessStructure, c.FirstName, c.LastName = "", staffID(1), "", "Jo", "Bloggs"
		}
		x.AddClient(c)
	}
	for i := range 60 {
		j := vendortest.XPMJob{ID: fmt.Sprintf("J%06d", i), UUID: fmt.Sprintf("10b00000-0000-4000-8000-%012d", i),
			Name: fmt.Sprintf("Accounts %d", i), ClientUUID: clientID(i % 25), State: []string{"Planned", "In Progress", "Awaiting info"}[i%3],
			Type: "Accounts", Start: epoch.AddDate(0, -2, 0), Due: epoch.AddDate(0, 1, i%28), Created: epoch.AddDate(0, -2, 0),
			Manager: staffID(i % 3)}
		switch {
		case i >= 55:
			j.Created, j.State, j.Completed = epoch.AddDate(-3, 0, 0), "Completed", epoch.AddDate(-2, 0, 0)
		case i >= 40:
			j.Created, j.State, j.Completed = epoch.AddDate(0, -6, 0), "Completed", epoch.AddDate(0, -1, 0)
		}
		x.AddJob(j)
	}
	for i := range 17 {
		inv := vendortest.XPMInvoice{ID: fmt.Sprintf("I%06d", i), UUID: fmt.Sprintf("1a000000-0000-4000-8000-%012d", i),
			Status: "Approved", ClientUUID: clientID(i), JobID: fmt.Sprintf("J%06d", i), Date: epoch.AddDate(0, 0, -20),
			Due: epoch.AddDate(0, 0, 10), Total: "1200.50", Paid: "0.00", Outstanding: "1200.50"}
		switch {
		case i >= 13:
			inv.Archived, inv.Date = true, epoch.AddDate(0, -4, 0)
		case i >= 10:
			inv.Status = "Draft"
		}
		x.AddInvoice(inv)
		if i%3 == 0 && inv.Status != "Draft" {
			x.Pay(inv.ID, "GoCardless payout", epoch.AddDate(0, 0, -5))
		}
	}
	return x
}

type env struct {
	x     *vendortest.XPM
	a     *xpm.Adapter
	clock *vendortest.Clock
	sink  *sink
}

// newEnv is the adapter on the fixture, with the token of a consent of
// the scopes the Xero app asks for Xero Practice Manager, to which the
// double holds every call the tests make.
func newEnv(t *testing.T, edit ...func(*xpm.Config)) env {
	t.Helper()
	x := fixture(t)
	clock := vendortest.NewClock(epoch)
	s := &sink{}
	token, _ := x.Identity.Consent(strings.Join(xero.Scopes["xpm"], " "))
	cfg := xpm.Config{Firm: "frm_acme", TenantID: x.TenantID, BaseURL: x.URL,
		OAuth2:   upstream.OAuth2Config{AccessToken: token},
		StageMap: map[string]string{"Awaiting info": "awaiting_client"},
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
	for _, e := range edit {
		e(&cfg)
	}
	a, err := xpm.New(cfg, upstream.Deps{Clock: clock, Changes: s})
	if err != nil {
		t.Fatal(err)
	}
	return env{x, a, clock, s}
}

func decode[T any](t *testing.T, raws []json.RawMessage) []T {
	t.Helper()
	out := make([]T, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func byID[T any](items []T, id func(T) string) map[string]T {
	m := map[string]T{}
	for _, it := range items {
		m[id(it)] = it
	}
	return m
}

func TestListsEveryKind(t *testing.T) {
	e := newEnv(t)
	clients := decode[practice.Client](t, vendortest.ListAll(t, e.a, live, practice.Clients, practice.Filter{}, 7))
	if len(clients) != 29 {
		t.Fatalf("%d clients, want the 29 not deleted", len(clients))
	}
	c := byID(clients, func(c practice.Client) string { return c.ID })
	if got := c["cli_"+clientID(1)]; practice.ValueOf(got.Owner) != "usr_"+staffID(1) || got.Type != "company" || got.Country != "GB" ||
		got.Status != "active" || len(got.Contacts) != 1 || got.Contacts[0].Role != "Director" || got.Version != practice.VersionAt(epoch) {
		t.Errorf("client 1: %+v", got)
	}
	if got := c["cli_"+clientID(5)]; practice.ValueOf(got.Owner) != "usr_"+staffID(1) || got.Type != "individual" {
		t.Errorf("client 5, owned by its job manager: %+v", got)
	}
	if c["cli_"+clientID(9)].Status != "archived" || c["cli_"+clientID(6)].Status != "prospect" {
		t.Errorf("statuses: %+v %+v", c["cli_"+clientID(9)], c["cli_"+clientID(6)])
	}

	jobs := decode[practice.Job](t, vendortest.ListAll(t, e.a, live, practice.Jobs, practice.Filter{}, 7))
	if len(jobs) != 55 {
		t.Fatalf("%d jobs, want 40 current and 15 of the last year", len(jobs))
	}
	j := byID(jobs, func(j practice.Job) string { return j.ID })
	if got := j["job_J000002"]; got.Stage != "awaiting_client" || practice.ValueOf(got.Client) != "cli_"+clientID(2) || practice.ValueOf(got.Owner) != "usr_"+staffID(2) ||
		got.Deadline != epoch.AddDate(0, 1, 2).Format(time.DateOnly) || got.ClosedAt != nil {
		t.Errorf("job 2: %+v", got)
	}
	if got := j["job_J000041"]; got.Stage != "completed" || got.ClosedAt == nil || !got.ClosedAt.Equal(epoch.AddDate(0, -1, 0)) {
		t.Errorf("completed job 41: %+v", got)
	}

	people := decode[practice.Person](t, vendortest.ListAll(t, e.a, live, practice.People, practice.Filter{}, 2))
	if len(people) != 3 || practice.ValueOf(people[0].Email) != "s0@firm.example" || !people[0].Active {
		t.Fatalf("people: %+v", people)
	}

	invoices := decode[practice.Invoice](t, vendortest.ListAll(t, e.a, live, practice.Invoices, practice.Filter{}, 4))
	if len(invoices) != 17 {
		t.Fatalf("%d invoices, want 17", len(invoices))
	}
	inv := byID(invoices, func(i practice.Invoice) string { return i.ID })
	if got := inv["inv_I000003"]; got.Status != "paid" || got.SettledVia != "gocardless" || got.PaidAt == nil ||
		!got.PaidAt.Equal(epoch.AddDate(0, 0, -5)) || got.AmountDue.Amount != "0.00" || got.Total != (practice.Money{Amount: "1200.50", Currency: "GBP"}) {
		t.Errorf("paid invoice 3: %+v", got)
	}
	if got := inv["inv_I000001"]; got.Status != "issued" || got.IssuedOn == "" || got.PaidAt != nil {
		t.Errorf("issued invoice 1: %+v", got)
	}
	if inv["inv_I000011"].Status != "draft" || inv["inv_I000011"].IssuedOn != "" || inv["inv_I000015"].Status != "paid" {
		t.Errorf("draft 11 %+v, archived 15 %+v", inv["inv_I000011"], inv["inv_I000015"])
	}

	// A record read alone is the record listed.
	for _, id := range []struct {
		k  practice.Kind
		id string
	}{{practice.Clients, "cli_" + clientID(1)}, {practice.Jobs, "job_J000041"}, {practice.People, "usr_" + staffID(2)},
		{practice.Invoices, "inv_I000003"}} {
		raw, err := e.a.Get(context.Background(), live, id.k, id.id)
		if err != nil {
			t.Fatalf("get %s: %v", id.id, err)
		}
		var m map[string]any
		json.Unmarshal(raw, &m)
		if m["id"] != id.id || m["version"] == nil {
			t.Errorf("get %s: %s", id.id, raw)
		}
	}
	if _, err := e.a.Get(context.Background(), live, practice.Jobs, "job_J999999"); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("a job XPM does not have: %v", err)
	}
	if _, err := e.a.Get(context.Background(), live, practice.Clients, "cli_not-a-uuid"); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("a malformed id: %v", err)
	}
}

// A poll with updated_since costs one call for clients (modifiedSince),
// two for jobs and three for invoices, and returns only what changed.
func TestPollingPushesUpdatedSinceDown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, k := range []practice.Kind{practice.Clients, practice.Jobs, practice.Invoices, practice.People} {
		vendortest.ListAll(t, e.a, live, k, practice.Filter{}, 200) // the backfill stamps every record
	}
	e.clock.Advance(time.Hour)
	since := e.clock.Now()
	e.clock.Advance(time.Minute)
	e.x.SetClock(e.clock.Now)

	poll := func(k practice.Kind) ([]json.RawMessage, []string) {
		t.Helper()
		before := len(e.x.Requests())
		p, err := e.a.List(ctx, live, k, practice.Query{Filter: practice.Filter{UpdatedSince: since}, Limit: 200})
		if err != nil || p.HasMore {
			t.Fatalf("poll %s: %v (has_more %v)", k, err, p.HasMore)
		}
		return p.Items, e.x.Requests()[before:]
	}
	for _, k := range []practice.Kind{practice.Clients, practice.Jobs, practice.Invoices, practice.People} {
		if items, calls := poll(k); len(items) != 0 {
			t.Errorf("quiet poll of %s: %d items after %v", k, len(items), calls)
		}
	}

	e.x.EditClient(clientID(3), func(c *vendortest.XPMClient) { c.Phone = "+44 20 7946 0000" })
	items, calls := poll(practice.Clients)
	if len(items) != 1 || len(calls) != 1 || !strings.Contains(calls[0], "modifiedSince=2026-03-02T09%3A58%3A00") {
		t.Fatalf("client poll: %d items, calls %v", len(items), calls)
	}
	got := decode[practice.Client](t, items)[0]
	if got.ID != "cli_"+clientID(3) || !got.UpdatedAt.Equal(e.clock.Now()) || got.Version != practice.VersionAt(e.clock.Now()) {
		t.Errorf("changed client %+v", got)
	}

	e.x.EditJob("J000004", func(j *vendortest.XPMJob) { j.State, j.Completed = "Completed", e.clock.Now() })
	items, calls = poll(practice.Jobs)
	if len(items) != 1 || len(calls) != 2 {
		t.Fatalf("job poll: %d items, calls %v", len(items), calls)
	}
	if j := decode[practice.Job](t, items)[0]; j.ID != "job_J000004" || j.Stage != "completed" {
		t.Errorf("completed job %+v", j)
	}

	e.x.Pay("I000001", "Stripe", e.clock.Now())
	items, calls = poll(practice.Invoices)
	if len(items) != 1 || len(calls) != 4 { // current, draft, a year of the list, the payments of the paid one
		t.Fatalf("invoice poll: %d items, calls %v", len(items), calls)
	}
	if inv := decode[practice.Invoice](t, items)[0]; inv.ID != "inv_I000001" || inv.Status != "paid" || inv.SettledVia != "stripe" {
		t.Errorf("paid invoice %+v", inv)
	}
	// The paid invoice's payments are read once.
	if _, calls = poll(practice.Invoices); len(calls) != 3 {
		t.Errorf("second invoice poll calls %v", calls)
	}
}

// The contract's filters hold whether XPM applies them or the adapter
// does.
func TestFilters(t *testing.T) {
	e := newEnv(t)
	jobs := decode[practice.Job](t, vendortest.ListAll(t, e.a, live, practice.Jobs,
		practice.Filter{Stage: "awaiting_client", Owner: "usr_" + staffID(2)}, 3))
	for _, j := range jobs {
		if j.Stage != "awaiting_client" || practice.ValueOf(j.Owner) != "usr_"+staffID(2) {
			t.Errorf("filtered job %+v", j)
		}
	}
	if len(jobs) != 13 { // the current jobs 2, 5, ... 38: Awaiting info, managed by staff 2
		t.Errorf("%d awaiting jobs of staff 2", len(jobs))
	}
	before := len(e.x.Requests())
	jobs = decode[practice.Job](t, vendortest.ListAll(t, e.a, live, practice.Jobs, practice.Filter{Client: "cli_" + clientID(3)}, 50))
	if len(jobs) != 3 || !strings.Contains(e.x.Requests()[before], "job.api/client/"+clientID(3)) {
		t.Errorf("client's jobs: %d, calls %v", len(jobs), e.x.Requests()[before:])
	}
	due := epoch.AddDate(0, 1, 5).Format(time.DateOnly)
	for _, j := range decode[practice.Job](t, vendortest.ListAll(t, e.a, live, practice.Jobs, practice.Filter{DeadlineAfter: due, DeadlineBefore: due}, 50)) {
		if j.Deadline != due {
			t.Errorf("deadline filter: %+v", j)
		}
	}
	clients := decode[practice.Client](t, vendortest.ListAll(t, e.a, live, practice.Clients, practice.Filter{Status: "archived"}, 50))
	if len(clients) != 3 {
		t.Errorf("%d archived clients", len(clients))
	}
}

func TestVendorErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	list := func() error {
		_, err := e.a.List(ctx, live, practice.Clients, practice.Query{Limit: 10})
		return err
	}
	e.x.Faults.Queue(vendortest.Fault{Status: http.StatusBadRequest, Body: `{"status":"ERROR","errorDescription":"bad"}`})
	if err := list(); !errors.Is(err, practice.ErrUnavailable) {
		t.Errorf("a 400 on a read: %v, want unavailable", err)
	}
	e.x.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"status":"ERROR","errorDescription":"The practice is locked"}`})
	if err := list(); !errors.Is(err, practice.ErrUnavailable) {
		t.Errorf("an ERROR answer on a read: %v, want unavailable", err)
	}
	e.x.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"status":"OK","clients":{"uuid":1}}`})
	if err := list(); !errors.Is(err, practice.ErrBadUpstream) {
		t.Errorf("an unreadable answer: %v, want bad upstream", err)
	}
	// A client that cannot be read is its own alone: the page goes on
	// without it and names it.
	e.x.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"status":"OK","clients":[{"uuid":"nope"}]}`})
	if page, err := e.a.List(ctx, live, practice.Clients, practice.Query{Limit: 10}); err != nil || len(page.Items) != 0 ||
		len(page.Unusable) != 1 || page.Unusable[0].ID != "cli_nope" || !errors.Is(page.Unusable[0], practice.ErrBadUpstream) {
		t.Errorf("a client without a uuid: %d items, unusable %v, %v", len(page.Items), page.Unusable, err)
	}
	// A 429 is waited out as XPM asks, then the call goes through.
	e.x.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "3"})
	if err := list(); err != nil {
		t.Fatalf("after a 429: %v", err)
	}
	if s := e.clock.Slept(); len(s) == 0 || s[len(s)-1] != 3*time.Second {
		t.Errorf("slept %v, want XPM's 3s", s)
	}
	// A wait longer than the policy allows answers at once, saying how long.
	e.x.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60"})
	err := list()
	if wait, ok := practice.RetryAfter(err); !ok || wait != time.Minute {
		t.Errorf("a 429 for a minute: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.a.List(cctx, live, practice.Jobs, practice.Query{Limit: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled listing: %v", err)
	}
	if _, err := e.a.List(ctx, practice.Tenant{Firm: "frm_acme", Sandbox: true}, practice.Jobs, practice.Query{}); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("sandbox: %v", err)
	}
	if _, err := e.a.List(ctx, live, practice.Jobs, practice.Query{Cursor: "garbage"}); err == nil {
		t.Error("a cursor that is not ours was taken")
	}
}

func TestWrites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	str := func(s string) *string { return &s }

	raw, err := e.a.CreateClient(ctx, live, practice.ClientInput{Name: str("Birch Ltd"), Type: str("company"), Status: str("prospect"),
		Owner: str("usr_" + staffID(2)), Country: str("GB"),
		Contacts: &[]practice.Contact{{Name: "Bea Birch", Role: "Director", Email: "bea@birch.example"}}})
	if err != nil {
		t.Fatal(err)
	}
	var c practice.Client
	json.Unmarshal(raw, &c)
	if c.Name != "Birch Ltd" || c.Status != "prospect" || practice.ValueOf(c.Owner) != "usr_"+staffID(2) || len(c.Contacts) != 1 || c.Type != "company" {
		t.Fatalf("created client %s", raw)
	}
	if got, _ := e.a.Get(ctx, live, practice.Clients, c.ID); string(got) != string(raw) {
		t.Errorf("created client reads back as\n%s\nnot\n%s", got, raw)
	}
	e.clock.Advance(time.Minute)
	raw, err = e.a.UpdateClient(ctx, live, c.ID, practice.ClientInput{Status: str("archived"),
		Contacts: &[]practice.Contact{{Name: "Bea Birch", Role: "Secretary"}, {Name: "Bo Birch", Role: "Director"}}})
	if err != nil {
		t.Fatal(err)
	}
	var u practice.Client
	json.Unmarshal(raw, &u)
	if u.Status != "archived" || len(u.Contacts) != 2 || u.Contacts[0].Role != "Secretary" || u.Version <= c.Version {
		t.Fatalf("updated client %s", raw)
	}
	if _, err := e.a.UpdateClient(ctx, live, c.ID, practice.ClientInput{Status: str("active")}); !isInvalid(err, "status") {
		t.Errorf("restoring an archived client: %v", err)
	}

	raw, err = e.a.CreateJob(ctx, live, practice.JobInput{Title: str("VAT Q1"), Client: str(c.ID), Type: str("tax"),
		Owner: str("usr_" + staffID(1)), Deadline: str("2026-04-07")})
	if err != nil {
		t.Fatal(err)
	}
	var j practice.Job
	json.Unmarshal(raw, &j)
	if j.Title != "VAT Q1" || j.Type != "Tax" || practice.ValueOf(j.Owner) != "usr_"+staffID(1) || j.Deadline != "2026-04-07" || j.Stage != "planned" {
		t.Fatalf("created job %s", raw)
	}
	if _, err := e.a.CreateJob(ctx, live, practice.JobInput{Title: str("x"), Client: str(c.ID), Type: str("Payroll")}); !isInvalid(err, "type") {
		t.Errorf("a job of no category: %v", err)
	}
	e.clock.Advance(time.Minute)
	raw, err = e.a.UpdateJob(ctx, live, j.ID, practice.JobInput{Title: str("VAT Q1 2026"), Deadline: str("2026-04-30")})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &j)
	if j.Title != "VAT Q1 2026" || j.Deadline != "2026-04-30" {
		t.Fatalf("updated job %s", raw)
	}

	e.clock.Advance(time.Minute)
	n := len(e.sink.all())
	raw, err = e.a.MoveJob(ctx, live, j.ID, practice.StageMove{Stage: "awaiting_client", Note: "Asked for the VAT receipts"})
	if err != nil {
		t.Fatal(err)
	}
	var moved practice.Job
	json.Unmarshal(raw, &moved)
	if moved.Stage != "awaiting_client" || moved.Version <= j.Version {
		t.Fatalf("moved job %s", raw)
	}
	if got, _ := e.a.Get(ctx, live, practice.Jobs, j.ID); string(got) != string(raw) {
		t.Errorf("moved job reads back as\n%s\nnot\n%s", got, raw)
	}
	number := strings.TrimPrefix(j.ID, "job_")
	if notes := e.x.Job(number).Notes; len(notes) != 1 || notes[0] != "Moved to awaiting client: Asked for the VAT receipts" {
		t.Errorf("job notes %q", notes)
	}
	chs := e.sink.all()[n:]
	if len(chs) != 1 || chs[0].Note != "Asked for the VAT receipts" || chs[0].Before == nil || string(chs[0].After) != string(raw) {
		t.Fatalf("the move's change records: %+v", chs)
	}
	if _, err := e.a.MoveJob(ctx, live, j.ID, practice.StageMove{Stage: "filed"}); !isInvalid(err, "stage") {
		t.Errorf("a stage with no XPM state: %v", err)
	}
	// Every write made one change record; the synchronizer's poll then finds
	// the records as the writes answered them.
	if got := len(e.sink.all()); got != 5 {
		t.Errorf("%d change records for 5 writes", got)
	}
}

func isInvalid(err error, param string) bool {
	var inv *practice.InvalidError
	return errors.As(err, &inv) && inv.Param == param
}

// XPM and the Xero ledger on one organisation spend one budget: Xero's
// limits are the organisation's.
func TestBudgetSharedWithXeroLedger(t *testing.T) {
	x := fixture(t)
	xr := vendortest.StartXero(t)
	xr.TenantID = x.TenantID
	// One host for both APIs, as api.xero.com is.
	mux := http.NewServeMux()
	for prefix, target := range map[string]string{"/practicemanager/": x.URL, "/api.xro/2.0/": xr.URL} {
		u, _ := url.Parse(target)
		u.Path = ""
		mux.Handle(prefix, httputil.NewSingleHostReverseProxy(u))
	}
	host := httptest.NewServer(mux)
	t.Cleanup(host.Close)

	clock := vendortest.NewClock(epoch)
	deps := upstream.Deps{Clock: clock, Budget: upstream.NewLocalBudget(clock)}
	// 30 a minute: a burst of 3, then one every 60s/28, longer than
	// the second a call may wait.
	policy := upstream.Policy{RateLimit: 30, RatePeriod: upstream.Duration(time.Minute), MaxRetryWait: upstream.Duration(time.Second)}
	a, err := xpm.New(xpm.Config{TenantID: x.TenantID, BaseURL: host.URL + "/practicemanager",
		OAuth2: upstream.OAuth2Config{AccessToken: x.Token}, Upstream: policy}, deps)
	if err != nil {
		t.Fatal(err)
	}
	l, err := xero.New(xero.Config{TenantID: x.TenantID, BaseURL: host.URL + "/api.xro/2.0",
		OAuth2: upstream.OAuth2Config{AccessToken: xr.Token}, Upstream: policy}, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := a.List(ctx, live, practice.People, practice.Query{Limit: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.List(ctx, live, practice.Invoices, practice.Query{Limit: 5}); err != nil {
		t.Fatal(err)
	}
	_, err = a.List(ctx, live, practice.People, practice.Query{Limit: 5})
	if wait, ok := practice.RetryAfter(err); !ok || wait <= time.Second {
		t.Fatalf("a fourth call in the minute across XPM and Xero: %v", err)
	}
}

// Documents filed by client folder and a Xero ledger's contacts name XPM
// clients, looked up in one read of the client list.
func TestClientsByName(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	before := len(e.x.Requests())
	for range 3 {
		l, err := e.a.LinkClient(ctx, live, linking.Candidate{Ref: "/client 03  LTD", Name: "client 03  LTD"})
		if err != nil || l.Client != "cli_"+clientID(3) || l.Outcome != linking.Linked {
			t.Fatalf("folder: %+v %v", l, err)
		}
	}
	if l, _ := e.a.LinkClient(ctx, live, linking.Candidate{Ref: "x", External: "x", Name: "Nobody Ltd"}); l.Outcome != linking.Missing {
		t.Errorf("an unknown contact: %+v", l)
	}
	// Every client shares one email: it names none of them.
	if l, _ := e.a.LinkClient(ctx, live, linking.Candidate{Ref: "y", Email: "Books@Client.example"}); l.Outcome != linking.Ambiguous {
		t.Errorf("a shared email: %+v", l)
	}
	if n := len(e.x.Requests()) - before; n != 1 {
		t.Errorf("%d XPM calls for five look-ups", n)
	}
}

// XPM reads modifiedSince in the practice's zone: in British Summer Time a
// client edited an hour after the last poll is still found.
func TestPollingInThePracticesZone(t *testing.T) {
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Skip("no time zone database")
	}
	e := newEnv(t, func(c *xpm.Config) { c.TimeZone = "Europe/London" })
	e.x.SetZone(london)
	summer := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
	e.clock.Advance(summer.Sub(e.clock.Now()))
	e.x.SetClock(e.clock.Now)
	vendortest.ListAll(t, e.a, live, practice.Clients, practice.Filter{}, 200)
	since := e.clock.Now()
	e.clock.Advance(10 * time.Minute)
	e.x.EditClient(clientID(3), func(c *vendortest.XPMClient) { c.Phone = "+44 20 7946 0001" })
	p, err := e.a.List(context.Background(), live, practice.Clients, practice.Query{Filter: practice.Filter{UpdatedSince: since}, Limit: 200})
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("poll in BST: %d items, %v; calls %v", len(p.Items), err, e.x.Requests())
	}
}
