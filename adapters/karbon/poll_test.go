package karbon_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

// watermark is after every change the fixture makes: contact i was
// modified i hours after epoch, the rest at epoch.
var watermark = epoch.Add(200 * time.Hour)

// A poll of clients after the backfill, with nothing changed, reads one
// page of each collection: contacts and organizations newest first, which
// end at their first row older than the poll, and the client groups,
// which Karbon does not publish an order by modification for.
func TestPollWithNothingChangedReadsOnePageOfEach(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	pageAll(t, a, practice.Clients, practice.Filter{}, 200)
	before := len(k.Requests())
	if got := pageAll(t, a, practice.Clients, practice.Filter{UpdatedSince: watermark}, 200); len(got) != 0 {
		t.Fatalf("%d clients changed since the watermark, want none", len(got))
	}
	lists := listRequests(t, k, before)
	if len(lists["Contacts"]) != 1 || len(lists["Organizations"]) != 1 || len(lists["ClientGroups"]) != 1 || len(lists) != 3 {
		t.Fatalf("a poll with nothing changed read %v, want one page of each collection", lists)
	}
	for _, coll := range []string{"Contacts", "Organizations"} {
		if q := lists[coll][0]; q.Get("$orderby") != "LastModifiedDateTime desc" {
			t.Errorf("%s polled in order %q", coll, q.Get("$orderby"))
		}
	}
	if q := lists["ClientGroups"][0]; q.Get("$orderby") != "" {
		t.Errorf("client groups polled in order %q, which Karbon does not publish", q.Get("$orderby"))
	}
}

// A contact and an organization modified after the watermark are what the
// poll returns, read in full; the rest is not read again.
func TestPollReturnsClientsModifiedAfterTheWatermark(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	pageAll(t, a, practice.Clients, practice.Filter{}, 200)
	k.AddContact(vendortest.KarbonContact{ContactKey: "C005", FirstName: "Ann", LastName: "Renamed", ContactType: "Client",
		OwnerKey: "U1partner", LastModified: watermark.Add(time.Hour)})
	k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: "O003", FullName: "Org 003 Holdings", ContactType: "Client",
		OwnerKey: "U2manager", LastModified: watermark.Add(time.Minute)})
	before := len(k.Requests())
	got := pageAll(t, a, practice.Clients, practice.Filter{UpdatedSince: watermark}, 200)
	if len(got) != 2 || got[0]["id"] != "cli_c-C005" || got[0]["name"] != "Ann Renamed" ||
		got[1]["id"] != "cli_o-O003" || got[1]["name"] != "Org 003 Holdings" {
		t.Fatalf("poll = %v", got)
	}
	// Three list pages and the two changed clients in full.
	if n := len(k.Requests()) - before; n != 5 {
		t.Fatalf("the poll made %d requests: %v", n, k.Requests()[before:])
	}
}

// Read newest first, a filter on modification answers what reading every
// page and filtering here answers, at any page size of ours and Karbon's
// and across cursors that resume inside Karbon's ordered next links.
func TestNewestFirstAnswersAsEveryPageWould(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) { c.PageSize, c.MaxScanPages = 10, 3 })
	all := map[string]json.RawMessage{}
	var order []string
	for _, c := range pageAll(t, a, practice.Clients, practice.Filter{}, 50) {
		raw, _ := json.Marshal(c)
		all[c["id"].(string)] = raw
		order = append(order, c["id"].(string))
	}
	at := func(h int) time.Time { return epoch.Add(time.Duration(h) * time.Hour) }
	cases := []struct {
		name  string
		f     practice.Filter
		limit int
	}{
		{"updated since, within the contacts", practice.Filter{UpdatedSince: at(37)}, 7},
		{"updated since, at a row's exact time", practice.Filter{UpdatedSince: at(90)}, 4},
		{"updated since everything", practice.Filter{UpdatedSince: epoch}, 25},
		{"updated since nothing", practice.Filter{UpdatedSince: watermark}, 5},
		{"with a status", practice.Filter{UpdatedSince: at(20), Status: "prospect"}, 3},
		{"with an owner", practice.Filter{UpdatedSince: at(50), Owner: "usr_U2manager"}, 6},
		{"last activity after", practice.Filter{LastActivityAfter: at(100)}, 5},
		{"a window", practice.Filter{UpdatedSince: at(10), LastActivityBefore: at(60)}, 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, id := range order {
				var c practice.Client
				json.Unmarshal(all[id], &c)
				f := tc.f
				if (f.UpdatedSince.IsZero() || !c.UpdatedAt.Before(f.UpdatedSince)) &&
					(f.LastActivityAfter.IsZero() || !c.LastActivityAt.Before(f.LastActivityAfter)) &&
					(f.LastActivityBefore.IsZero() || !c.LastActivityAt.After(f.LastActivityBefore)) &&
					(f.Status == "" || c.Status == f.Status) && (f.Owner == "" || practice.ValueOf(c.Owner) == f.Owner) {
					want = append(want, id)
				}
			}
			var got []string
			for _, c := range pageAll(t, a, practice.Clients, tc.f, tc.limit) {
				id := c["id"].(string)
				if raw, _ := json.Marshal(c); string(raw) != string(all[id]) {
					t.Errorf("%s differs: %s\nwant %s", id, raw, all[id])
				}
				got = append(got, id)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d clients %v\nwant %d %v", len(got), got, len(want), want)
			}
		})
	}
}
