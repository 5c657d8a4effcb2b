package karbon_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/vendortest"
)

// listRequests are the requests since from that read a list of Contacts,
// Organizations or ClientGroups, by collection.
func listRequests(t *testing.T, k *vendortest.Karbon, from int) map[string][]url.Values {
	t.Helper()
	out := map[string][]url.Values{}
	for _, r := range k.Requests()[from:] {
		u, err := url.Parse(strings.TrimPrefix(r, "GET "))
		if err != nil {
			t.Fatal(err)
		}
		coll := strings.TrimPrefix(u.Path, "/v3/")
		if strings.Contains(coll, "/") {
			t.Fatalf("a lookup read a record: %s", r)
		}
		out[coll] = append(out[coll], u.Query())
	}
	return out
}

// linkName is the client of a name, "" when none links.
func linkName(ctx context.Context, a *karbon.Adapter, name string) (string, error) {
	l, err := a.LinkClient(ctx, live, linking.Candidate{Ref: "/" + name, Name: name})
	return l.Client, err
}

// linkContact is the client of a ledger contact, "" when none links.
func linkContact(ctx context.Context, a *karbon.Adapter, external, name string) (string, error) {
	l, err := a.LinkClient(ctx, live, linking.Candidate{Ref: external, External: external, Name: name})
	return l.Client, err
}

// folder resolves a folder name, failing t on an error.
func folder(t *testing.T, a *karbon.Adapter, name string) string {
	t.Helper()
	id, err := linkName(context.Background(), a, name)
	if err != nil {
		t.Fatalf("folder %q: %v", name, err)
	}
	return id
}

// The fixture's directory is 4 Karbon pages: contacts (121, two pages),
// organizations and client groups (one each).
const directoryPages = 4

// Names are answered from one read of the client directory, whatever
// their number: 2 + 150 names of every kind, and names of no client, cost
// its four pages, where a request per name and collection cost 195.
func TestNamesResolveFromOneDirectoryRead(t *testing.T) {
	k := fixture(t)
	// A name held by a contact and an organization, or an organization
	// and a group, links nothing: which one is meant is not certain.
	k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: "O900", FullName: "Ann Client005", ContactType: "Client", LastModified: epoch})
	k.AddClientGroup(vendortest.KarbonClientGroup{ClientGroupKey: "G900", FullName: "Org 007 Ltd", ContactType: "Client", LastModified: epoch})
	a, _ := newAdapter(t, k)
	want := map[string]string{"Smith Family": "cli_g-G001", "Old Group": "cli_g-G002", "Nobody Ltd": "", "Ann Client999": "",
		// Case, spacing and a trailing full stop aside.
		"smith  FAMILY.": "cli_g-G001"}
	for i := range 120 {
		want[fmt.Sprintf("Ann Client%03d", i)] = fmt.Sprintf("cli_c-C%03d", i)
	}
	for i := range 30 {
		want[fmt.Sprintf("Org %03d Ltd", i)] = fmt.Sprintf("cli_o-O%03d", i)
	}
	want["Ann Client005"], want["Org 007 Ltd"] = "", ""
	for name, id := range want {
		if got := folder(t, a, name); got != id {
			t.Errorf("%q: %q, want %q", name, got, id)
		}
	}
	for name := range want {
		if id, err := linkContact(context.Background(), a, "", name); err != nil || id != want[name] {
			t.Errorf("contact named %q: %q, %v", name, id, err)
		}
	}
	lists := listRequests(t, k, 0)
	if n := len(lists["Contacts"]) + len(lists["Organizations"]) + len(lists["ClientGroups"]); n != directoryPages || len(lists) != 3 {
		t.Fatalf("%d names cost %d requests %v, want the directory's %d pages", 2*len(want), n, k.Requests(), directoryPages)
	}
	for coll, qs := range lists {
		for _, q := range qs {
			if q.Get("$filter") != "" {
				t.Errorf("a %s page filtered by %q", coll, q.Get("$filter"))
			}
		}
	}
}

// Lookups at the same moment share one read of the directory.
func TestConcurrentLookupsShareOneRead(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, want := fmt.Sprintf("Ann Client%03d", i), fmt.Sprintf("cli_c-C%03d", i)
			if i >= 50 {
				name, want = fmt.Sprintf("Stranger %d", i), ""
			}
			if id, err := linkName(context.Background(), a, name); err != nil || id != want {
				errs <- fmt.Errorf("%q: %q, %v", name, id, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(k.Requests()); n != directoryPages {
		t.Fatalf("60 concurrent lookups made %d requests, want %d", n, directoryPages)
	}
}

// Names that match no client cost at most one look a minute for clients
// changed since the directory was read: one page of contacts and of
// organizations, newest first, and the client groups; ten minutes after
// the last full read the directory is read whole again.
func TestMissStormCostsOneLookForChangesAMinute(t *testing.T) {
	k := fixture(t)
	a, clock := newAdapter(t, k)
	clock.Advance(200 * time.Hour) // after every client's last change
	folder(t, a, "Smith Family")
	for minute := range 12 {
		before := len(k.Requests())
		for i := range 200 {
			if id := folder(t, a, fmt.Sprintf("Stranger %d-%d", minute, i)); id != "" {
				t.Fatalf("a stranger is %s", id)
			}
			clock.Advance(time.Minute / 200)
		}
		lists := listRequests(t, k, before)
		switch minute {
		case 0:
			if len(lists) != 0 {
				t.Fatalf("misses in the minute of the read: %v", lists)
			}
		case 10:
			if len(lists["Contacts"]) != 2 || len(lists["Organizations"]) != 1 || len(lists["ClientGroups"]) != 1 ||
				lists["Contacts"][0].Get("$orderby") != "" {
				t.Fatalf("minute %d: lists %v, want the directory read whole", minute, lists)
			}
		default:
			if len(lists["Contacts"]) != 1 || len(lists["Organizations"]) != 1 || len(lists["ClientGroups"]) != 1 {
				t.Fatalf("minute %d: lists %v, want one page of each", minute, lists)
			}
			for _, coll := range []string{"Contacts", "Organizations"} {
				if q := lists[coll][0]; q.Get("$orderby") != "LastModifiedDateTime desc" {
					t.Errorf("minute %d: %s read in order %q", minute, coll, q.Get("$orderby"))
				}
			}
			if q := lists["ClientGroups"][0]; q.Get("$orderby") != "" {
				t.Errorf("client groups read in order %q, which Karbon does not publish", q.Get("$orderby"))
			}
		}
	}
}

// A client added in Karbon is found within a minute of the last read (the
// look for changes a miss makes); one whose modification time is older
// than that look reaches back, such as one imported, within ten (the next
// full read). A renamed client is found by its new name, no longer by
// its old one.
func TestClientAddedInKarbonIsFound(t *testing.T) {
	k := fixture(t)
	a, clock := newAdapter(t, k)
	clock.Advance(200 * time.Hour) // after every client's last change
	folder(t, a, "Smith Family")
	clock.Advance(10 * time.Second)
	k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: "O500", FullName: "Newco Ltd", ContactType: "Client", LastModified: clock.Now()})
	k.AddContact(vendortest.KarbonContact{ContactKey: "C500", FirstName: "Ida", LastName: "Imported", ContactType: "Client", LastModified: epoch.Add(-24 * time.Hour)})
	k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: "O004", FullName: "Org Four Group", ContactType: "Client", LastModified: clock.Now()})
	if id := folder(t, a, "Newco Ltd"); id != "" {
		t.Fatalf("found %s within the minute, without a read", id)
	}
	clock.Advance(time.Minute)
	if id := folder(t, a, "Newco Ltd"); id != "cli_o-O500" {
		t.Fatalf("a client added a minute ago: %q", id)
	}
	if id := folder(t, a, "Org Four Group"); id != "cli_o-O004" {
		t.Fatalf("a renamed client by its new name: %q", id)
	}
	if id := folder(t, a, "Org 004 Ltd"); id != "" {
		t.Fatalf("a renamed client by its old name: %q", id)
	}
	if id := folder(t, a, "Ida Imported"); id != "" {
		t.Fatalf("found %s, modified before the last read", id)
	}
	clock.Advance(9 * time.Minute)
	if id := folder(t, a, "Ida Imported"); id != "cli_c-C500" {
		t.Fatalf("a client ten minutes after the last full read: %q", id)
	}
}

// Karbon's lists do not carry ExternalKey, so a contact id is looked up
// with a filtered request per collection, once in ten minutes, shared by
// the lookups at the same moment; a name after a miss costs nothing more.
func TestContactIDsAreLookedUpOnceEach(t *testing.T) {
	k := fixture(t)
	a, clock := newAdapter(t, k)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if id, err := linkContact(ctx, a, "xero-c-42", "whatever"); err != nil || id != "cli_c-C042" {
				t.Errorf("by external key: %q, %v", id, err)
			}
		}()
	}
	wg.Wait()
	// Both collections are asked, so that a key two clients hold is
	// known to be ambiguous.
	if n := len(k.Requests()); n != 2 {
		t.Fatalf("ten lookups of one contact id at once made %d requests", n)
	}
	for i := range 20 {
		if id, err := linkContact(ctx, a, fmt.Sprintf("xero-unknown-%d", i), "Org 004 Ltd"); err != nil || id != "cli_o-O004" {
			t.Fatalf("by name after the contact id: %q, %v", id, err)
		}
	}
	// 2, then 2 per unknown id (contacts, organizations), and the
	// directory's pages.
	if n := len(k.Requests()); n != 2+2*20+directoryPages {
		t.Fatalf("%d requests", n)
	}
	for _, qs := range listRequests(t, k, 0) {
		for _, q := range qs {
			if q.Get("$filter") == "ExternalKey eq ''" {
				t.Fatalf("looked up an empty contact id")
			}
		}
	}
	clock.Advance(5 * time.Minute)
	before := len(k.Requests())
	linkContact(ctx, a, "xero-c-42", "")
	linkContact(ctx, a, "xero-unknown-3", "Org 004 Ltd")
	if n := len(k.Requests()) - before; n != 0 {
		t.Fatalf("lookups within ten minutes made %d requests", n)
	}
}

// When Karbon's lists cannot be read, names are looked up one by one for
// the minute after, so the firm's other systems keep linking while
// Karbon's own sync fails; then the directory is read again.
func TestNamesAreLookedUpOneByOneWhileListsCannotBeRead(t *testing.T) {
	k := fixture(t)
	a, clock := newAdapter(t, k)
	k.LoopNextLinks(true)
	if id := folder(t, a, "Org 004 Ltd"); id != "cli_o-O004" {
		t.Fatalf("while Karbon's next links repeat: %q", id)
	}
	if id := folder(t, a, "Smith Family"); id != "cli_g-G001" {
		t.Fatalf("while Karbon's next links repeat: %q", id)
	}
	lists := listRequests(t, k, 0)
	unfiltered := 0
	for _, qs := range lists {
		for _, q := range qs {
			if q.Get("$filter") == "" {
				unfiltered++
			}
		}
	}
	// One page of contacts tried, then a request per collection and
	// name: every collection, so that a name two hold links neither.
	if unfiltered != 1 || len(k.Requests()) != 1+3+3 {
		t.Fatalf("requests %v", k.Requests())
	}
	k.LoopNextLinks(false)
	clock.Advance(time.Minute)
	before := len(k.Requests())
	for i := range 30 {
		if id := folder(t, a, fmt.Sprintf("Org %03d Ltd", i)); id != fmt.Sprintf("cli_o-O%03d", i) {
			t.Fatalf("once Karbon pages properly: %q", id)
		}
	}
	if n := len(k.Requests()) - before; n != directoryPages {
		t.Fatalf("once Karbon pages properly, 30 names made %d requests, want the directory's %d", n, directoryPages)
	}
}
