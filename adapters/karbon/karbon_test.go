package karbon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

var (
	live  = practice.Tenant{Firm: "frm_acme"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

// sink collects change records.
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

// statuses cycle through the work items of the fixture.
var statuses = [][2]string{{"Planned", ""}, {"ReadyToStart", ""}, {"InProgress", ""}, {"InProgress", "In Review"},
	{"Waiting", "Waiting on client"}, {"InProgress", "Awaiting client approval"}, {"Completed", "Filed"}, {"Completed", ""}}

// fixture fills a Karbon double: 3 users, 120 contacts (every tenth a
// supplier), 30 organizations with contacts, 2 client groups and 250
// work items, so every list crosses Karbon's 100-item pages.
func fixture(t *testing.T) *vendortest.Karbon {
	t.Helper()
	k := vendortest.StartKarbon(t)
	k.AddUser(vendortest.KarbonUser{Id: "U1partner", Name: "Pat Partner", EmailAddress: "pat@firm.example", Roles: []string{"Partner"}})
	k.AddUser(vendortest.KarbonUser{Id: "U2manager", Name: "Mo Manager", EmailAddress: "mo@firm.example", Roles: []string{"Client Manager"}})
	k.AddUser(vendortest.KarbonUser{Id: "U3staff", Name: "Sam Staff", EmailAddress: "sam@firm.example"})
	owners := []string{"U1partner", "U2manager"}
	for i := range 120 {
		typ := "Client"
		switch {
		case i%10 == 9:
			typ = "Supplier"
		case i%10 == 8:
			typ = "Prospect"
		}
		k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann", LastName: fmt.Sprintf("Client%03d", i),
			ContactType: typ, Email: fmt.Sprintf("ann%d@example.com", i), Phone: "0207 946 0000", Country: "GB",
			OwnerKey: owners[i%2], LastModified: epoch.Add(time.Duration(i) * time.Hour), ExternalKey: fmt.Sprintf("xero-c-%d", i)})
	}
	for i := range 30 {
		k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: fmt.Sprintf("O%03d", i), FullName: fmt.Sprintf("Org %03d Ltd", i),
			ContactType: "Client", EntityType: []string{"Corporation", "Partnership", "Estate or Trust"}[i%3], Email: "office@org.example",
			Country: "GB", OwnerKey: owners[i%2], LastModified: epoch})
	}
	k.AddContact(vendortest.KarbonContact{ContactKey: "P001", FirstName: "Olive", LastName: "Officer", ContactType: "Other",
		Email: "olive@org.example", Role: "Director", OrganizationKey: "O000", LastModified: epoch})
	k.AddClientGroup(vendortest.KarbonClientGroup{ClientGroupKey: "G001", FullName: "Smith Family", ContactType: "Client",
		PrimaryContact: "Jo Smith", OwnerKey: "U1partner", LastModified: epoch})
	k.AddClientGroup(vendortest.KarbonClientGroup{ClientGroupKey: "G002", FullName: "Old Group", ContactType: "Former Client",
		OwnerKey: "U2manager", LastModified: epoch})
	for i := range 250 {
		st := statuses[i%len(statuses)]
		deadline := epoch.AddDate(0, 0, i).Format(time.RFC3339)
		w := vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: fmt.Sprintf("Accounts %d", i),
			AssigneeKey: owners[i%2], ClientKey: fmt.Sprintf("C%03d", i%100), ClientType: "Contact",
			StartDate: epoch.Format(time.RFC3339), DeadlineDate: &deadline, WorkType: "Accounts",
			PrimaryStatus: st[0], SecondaryStatus: st[1]}
		if st[0] == "Completed" {
			w.CompletedDate = epoch.Add(48 * time.Hour).Format(time.RFC3339)
		}
		k.AddWorkItem(w)
	}
	return k
}

type karbonConfig = karbon.Config

type opt func(*karbonConfig, *upstream.Deps)

func newAdapter(t *testing.T, k *vendortest.Karbon, opts ...opt) (*karbon.Adapter, *vendortest.Clock) {
	t.Helper()
	clock := vendortest.NewClock(epoch)
	cfg := karbon.Config{Firm: "frm_acme", AccessKey: k.AccessKey, Bearer: k.Bearer, BaseURL: k.URL,
		WebhookSigningKey: "karbon-signing-key-0001", NoteAuthor: "pat@firm.example",
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
	deps := upstream.Deps{Clock: clock}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	a, err := karbon.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a, clock
}

// page lists everything with limit, checking paging on the way.
func pageAll(t *testing.T, a *karbon.Adapter, k practice.Kind, f practice.Filter, limit int) []map[string]any {
	t.Helper()
	var out []map[string]any
	seen := map[string]bool{}
	cursor := ""
	for range 1000 {
		p, err := a.List(context.Background(), live, k, practice.Query{Filter: f, Cursor: cursor, Limit: limit})
		if err != nil {
			t.Fatalf("list %s: %v", k, err)
		}
		if len(p.Items) > limit {
			t.Fatalf("%d items over the limit %d", len(p.Items), limit)
		}
		for _, raw := range p.Items {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			id := m["id"].(string)
			if seen[id] {
				t.Fatalf("%s listed twice", id)
			}
			seen[id] = true
			out = append(out, m)
		}
		if !p.HasMore {
			return out
		}
		cursor = p.Next
	}
	t.Fatal("paging never ended")
	return nil
}

func TestListJobsAcrossKarbonPages(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	stageOf := func(i int) string {
		return map[[2]string]string{
			{"Planned", ""}: "planned", {"ReadyToStart", ""}: "ready_to_start", {"InProgress", ""}: "in_progress",
			{"InProgress", "In Review"}: "in_review", {"Waiting", "Waiting on client"}: "awaiting_client",
			{"InProgress", "Awaiting client approval"}: "awaiting_client_approval", {"Completed", "Filed"}: "filed",
			{"Completed", ""}: "completed",
		}[statuses[i%len(statuses)]]
	}
	count := func(pred func(i int) bool) int {
		n := 0
		for i := range 250 {
			if pred(i) {
				n++
			}
		}
		return n
	}
	cases := []struct {
		name   string
		f      practice.Filter
		limit  int
		want   int
		pushed string // a $filter Karbon must have been sent
	}{
		{"everything", practice.Filter{}, 37, 250, ""},
		{"stage pushed down as its primary, refined here", practice.Filter{Stage: "in_review"}, 10,
			count(func(i int) bool { return stageOf(i) == "in_review" }), "PrimaryStatus eq 'InProgress'"},
		{"stage of a secondary only", practice.Filter{Stage: "filed"}, 7,
			count(func(i int) bool { return stageOf(i) == "filed" }), "PrimaryStatus eq 'Completed'"},
		{"owner by email", practice.Filter{Owner: "usr_U2manager"}, 50, 125, "AssigneeEmailAddress eq 'mo@firm.example'"},
		{"client", practice.Filter{Client: "cli_c-C007"}, 50, 3, "ClientKey eq 'C007'"},
		{"deadline range, applied here", practice.Filter{DeadlineAfter: "2026-04-01", DeadlineBefore: "2026-04-30"}, 8, 30, ""},
		{"an owner who is not a user", practice.Filter{Owner: "usr_nobody"}, 50, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs := pageAll(t, a, practice.Jobs, tc.f, tc.limit)
			if len(jobs) != tc.want {
				t.Fatalf("%d jobs, want %d", len(jobs), tc.want)
			}
			for _, j := range jobs {
				if !practice.ValidStage(j["stage"].(string)) || !strings.HasPrefix(j["id"].(string), "job_") {
					t.Fatalf("bad job %v", j)
				}
				if tc.f.Stage != "" && j["stage"] != tc.f.Stage {
					t.Fatalf("stage %v in a %s list", j["stage"], tc.f.Stage)
				}
			}
			if tc.pushed != "" && !slices.ContainsFunc(k.Requests(), func(r string) bool {
				u, _ := url.Parse(strings.TrimPrefix(r, "GET "))
				return strings.Contains(u.Query().Get("$filter"), tc.pushed)
			}) {
				t.Fatalf("no request carried $filter %q", tc.pushed)
			}
			for _, r := range k.Requests() {
				u, _ := url.Parse(strings.TrimPrefix(r, "GET "))
				if top := u.Query().Get("$top"); top != "" && top > "100" && len(top) >= 3 {
					t.Fatalf("asked Karbon for $top=%s", top)
				}
			}
		})
	}
}

func TestJobShape(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	raw, err := a.Get(context.Background(), live, practice.Jobs, "job_W0006")
	if err != nil {
		t.Fatal(err)
	}
	var j practice.Job
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		t.Fatal(err)
	}
	closed := epoch.Add(48 * time.Hour)
	// Karbon publishes no modification time: updated_at is the
	// gateway's stamp, after the completion the version was before.
	want := practice.Job{ID: "job_W0006", Object: "job", Title: "Accounts 6", Type: "Accounts", Client: practice.Known("cli_c-C006"),
		Owner: practice.Known("usr_U1partner"), Stage: "filed", Deadline: "2026-03-08", CreatedAt: &epoch, UpdatedAt: j.UpdatedAt,
		Version: j.UpdatedAt.UnixMilli()}
	if j.ClosedAt != nil || j.CreatedAt == nil || !j.CreatedAt.Equal(epoch) || !j.UpdatedAt.After(closed) {
		t.Fatalf("times: %+v", j)
	}
	j.CreatedAt, j.UpdatedAt = want.CreatedAt, want.UpdatedAt
	if got, wantRaw := mustMarshal(t, j), mustMarshal(t, want); got != wantRaw {
		t.Fatalf("job = %s\nwant %s", got, wantRaw)
	}
	raw, _ = a.Get(context.Background(), live, practice.Jobs, "job_W0007")
	json.Unmarshal(raw, &j)
	if j.Stage != "completed" || j.ClosedAt == nil || !j.ClosedAt.Equal(closed) {
		t.Fatalf("completed job: %+v", j)
	}
}

func TestClients(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	clients := pageAll(t, a, practice.Clients, practice.Filter{}, 25)
	// 108 contacts that are clients or prospects, 30 organizations, 2 groups.
	if len(clients) != 140 {
		t.Fatalf("%d clients, want 140", len(clients))
	}
	for _, c := range clients {
		if !strings.HasPrefix(c["id"].(string), "cli_") || c["owner"] == "" || c["country"] != "GB" {
			t.Fatalf("client %v", c)
		}
		if c["id"] == "cli_c-C009" {
			t.Fatal("a supplier is listed as a client")
		}
	}
	prospects := pageAll(t, a, practice.Clients, practice.Filter{Status: "prospect"}, 5)
	if len(prospects) != 12 {
		t.Fatalf("%d prospects, want 12", len(prospects))
	}
	mine := pageAll(t, a, practice.Clients, practice.Filter{Owner: "usr_U1partner", Status: "active"}, 10)
	if len(mine) != 48+15+1 {
		t.Fatalf("%d active clients of U1partner, want 64", len(mine))
	}
	recent := pageAll(t, a, practice.Clients, practice.Filter{UpdatedSince: epoch.Add(100 * time.Hour)}, 10)
	if len(recent) != 18 {
		t.Fatalf("%d clients updated since, want 18", len(recent))
	}

	raw, err := a.Get(context.Background(), live, practice.Clients, "cli_o-O000")
	if err != nil {
		t.Fatal(err)
	}
	var c practice.Client
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c.Type != "company" || c.Status != "active" || practice.ValueOf(c.Owner) != "usr_U1partner" || c.Email != "office@org.example" ||
		len(c.Contacts) != 1 || c.Contacts[0] != (practice.Contact{Name: "Olive Officer", Role: "director", Email: "olive@org.example"}) {
		t.Fatalf("organization client: %+v", c)
	}
	raw, _ = a.Get(context.Background(), live, practice.Clients, "cli_g-G002")
	json.Unmarshal(raw, &c)
	if c.Status != "inactive" || c.Type != "company" || practice.ValueOf(c.Owner) != "usr_U2manager" {
		t.Fatalf("client group: %+v", c)
	}
	for _, id := range []string{"cli_c-C009", "cli_c-NOPE", "cli_x-1", "cli_c-../x", "job_1"} {
		if _, err := a.Get(context.Background(), live, practice.Clients, id); !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("%s: err = %v, want not found", id, err)
		}
	}
}

func TestClientDetailsAreCached(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	pageAll(t, a, practice.Clients, practice.Filter{}, 50)
	before := len(k.Requests())
	pageAll(t, a, practice.Clients, practice.Filter{}, 50)
	// The second pass reads only the lists: 2 pages of contacts, 1 of
	// organizations, 1 of client groups (each page of ours refetches the
	// Karbon page it resumes in).
	if extra := len(k.Requests()) - before; extra > 10 {
		t.Fatalf("second pass made %d requests; details were not cached", extra)
	}
}

func TestPeopleAndOtherKinds(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	people := pageAll(t, a, practice.People, practice.Filter{}, 2)
	if len(people) != 3 || people[0]["role"] != "partner" || people[1]["role"] != "client_manager" || people[2]["role"] != "staff" {
		t.Fatalf("people = %v", people)
	}
	for _, kind := range []practice.Kind{practice.Engagements, practice.Documents, practice.Invoices} {
		p, err := a.List(context.Background(), live, kind, practice.Query{Limit: 10})
		if err != nil || len(p.Items) != 0 || p.HasMore {
			t.Fatalf("%s: %+v, %v", kind, p, err)
		}
		if _, err := a.Get(context.Background(), live, kind, "eng_1"); !errors.Is(err, practice.ErrNotFound) {
			t.Fatalf("%s get: %v", kind, err)
		}
	}
	if _, err := a.List(context.Background(), practice.Tenant{Firm: "frm_other"}, practice.Jobs, practice.Query{Limit: 1}); !errors.Is(err, practice.ErrNotFound) {
		t.Fatal("another firm's tenant was served")
	}
	if _, err := a.List(context.Background(), practice.Tenant{Firm: "frm_acme", Sandbox: true}, practice.Jobs, practice.Query{Limit: 1}); !errors.Is(err, practice.ErrNotFound) {
		t.Fatal("the sandbox was served from the live Karbon")
	}
	if _, err := a.List(context.Background(), live, practice.Jobs, practice.Query{Limit: 1, Cursor: "garbage"}); err == nil {
		t.Fatal("a forged cursor was accepted")
	}
}

func TestClientForContact(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	ctx := context.Background()
	if id, err := linkContact(ctx, a, "xero-c-42", "whatever"); err != nil || id != "cli_c-C042" {
		t.Fatalf("by external key: %q, %v", id, err)
	}
	if id, err := linkContact(ctx, a, "unknown", "Org 004 Ltd"); err != nil || id != "cli_o-O004" {
		t.Fatalf("by name: %q, %v", id, err)
	}
	if id, err := linkName(ctx, a, "Smith Family"); err != nil || id != "cli_g-G001" {
		t.Fatalf("folder: %q, %v", id, err)
	}
	n := len(k.Requests())
	linkName(ctx, a, "Smith Family")
	if len(k.Requests()) != n {
		t.Fatal("lookups are not cached")
	}
	// Two clients holding one external key link neither, and say so: the
	// cross-reference comes first, so the name does not decide either.
	k.AddContact(vendortest.KarbonContact{ContactKey: "C900", FirstName: "Dup", LastName: "One", ContactType: "Client",
		ExternalKey: "xero-dup", LastModified: epoch})
	k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: "O901", FullName: "Dup Two Ltd", ContactType: "Client",
		ExternalKey: "xero-dup", LastModified: epoch})
	l, err := a.LinkClient(ctx, live, linking.Candidate{Ref: "xero-dup", External: "xero-dup", Name: "Dup Two Ltd"})
	if err != nil || l.Outcome != linking.Ambiguous || l.Client != "" || l.Ref() != nil {
		t.Fatalf("a duplicated external key: %+v, %v", l, err)
	}
	if l, _ := a.LinkClient(ctx, live, linking.Candidate{Ref: "/Nobody", Name: "Nobody At All"}); l.Outcome != linking.Missing {
		t.Fatalf("no such client: %+v", l)
	}
}

// mustMarshal is v in the records' encoding, to compare records whose
// nullable fields are pointers.
func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := practice.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
