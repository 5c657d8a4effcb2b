package karbon_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/practice"
)

// Pages after the first are read at the @odata.nextLink Karbon gave, as
// given: the double writes its links as an OData server does ("...&$skip=100",
// the $ unescaped, the request's own parameters first), which a $skip of
// our own would not reproduce.
func TestPagesFollowKarbonsNextLinks(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	jobs := pageAll(t, a, practice.Jobs, practice.Filter{Owner: "usr_U1partner"}, 100)
	if len(jobs) != 125 {
		t.Fatalf("%d jobs, want 125", len(jobs))
	}
	people := pageAll(t, a, practice.Clients, practice.Filter{}, 200)
	if len(people) != 140 {
		t.Fatalf("%d clients, want 140", len(people))
	}
	var later int
	for _, r := range k.Requests() {
		uri := strings.TrimPrefix(r, "GET ")
		if !strings.HasPrefix(uri, "/v3/WorkItems?") && !strings.HasPrefix(uri, "/v3/Contacts?") {
			continue
		}
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		if u.Query().Get("$skip") == "" {
			continue
		}
		later++
		if !strings.HasSuffix(u.RawQuery, "&$skip="+u.Query().Get("$skip")) {
			t.Errorf("%s is not a next link Karbon gave", uri)
		}
	}
	if later < 2 {
		t.Fatalf("only %d requests for later pages: %v", later, k.Requests())
	}
}

// Cursors now carry Karbon's next link. One from before, which carried a
// $skip, is answered invalid_cursor, saying to start again, rather than
// turned into a request Karbon did not give; one that names another
// collection's link is refused as forged.
func TestCursorsCarryKarbonsNextLinks(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	ctx := context.Background()
	cursor := func(token string) string {
		return paging.Cursor{Stack: []paging.Frame{{Page: token, Index: 3, Last: "W0102"}}}.Encode()
	}
	p, err := a.List(ctx, live, practice.Jobs, practice.Query{Limit: 5, Cursor: cursor("0")})
	if err != nil || len(p.Items) != 5 {
		t.Fatalf("the start of the collection as an old cursor had it: %d items, %v", len(p.Items), err)
	}
	_, err = a.List(ctx, live, practice.Jobs, practice.Query{Limit: 5, Cursor: cursor("200")})
	var invalid *practice.InvalidError
	if !errors.As(err, &invalid) || invalid.Code != "invalid_cursor" || !strings.Contains(invalid.Message, "first page") {
		t.Fatalf("a $skip cursor: %v", err)
	}
	for _, token := range []string{"/v3/Users?$top=100&$skip=100", "https://evil.example/v3/WorkItems?$skip=100", "x"} {
		_, err = a.List(ctx, live, practice.Jobs, practice.Query{Limit: 5, Cursor: cursor(token)})
		if !errors.As(err, &invalid) || invalid.Code != "invalid_cursor" {
			t.Errorf("cursor %q: %v", token, err)
		}
	}
	_, err = a.List(ctx, live, practice.Clients, practice.Query{Limit: 5, Cursor: cursor("c:100")})
	if !errors.As(err, &invalid) || invalid.Code != "invalid_cursor" {
		t.Fatalf("an old client cursor: %v", err)
	}
	if p, err := a.List(ctx, live, practice.Clients, practice.Query{Limit: 5, Cursor: cursor("o:0")}); err != nil || len(p.Items) != 5 {
		t.Fatalf("an old cursor at the start of organizations: %v", err)
	}
}

// Karbon publishes one $expand value per read of a contact. The business
// cards give email, phone and country; the owner comes from ClientOwner,
// resolved through the user directory, with no read of the client team.
func TestContactReadExpandsOnlyItsBusinessCards(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	raw, err := a.Get(context.Background(), live, practice.Clients, "cli_c-C003")
	if err != nil {
		t.Fatal(err)
	}
	var c practice.Client
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if practice.ValueOf(c.Owner) != "usr_U2manager" || c.Email != "ann3@example.com" || c.Phone != "0207 946 0000" || c.Country != "GB" {
		t.Fatalf("contact client: %+v", c)
	}
	for _, r := range k.Requests() {
		if strings.HasPrefix(r, "GET /v3/Contacts/") && !strings.HasSuffix(r, "?$expand=BusinessCards") {
			t.Errorf("contact read %s", r)
		}
	}
}

// The first look at every record is the read model's backfill, which
// pages each kind through List (200 a page, following Page.Next). When
// Karbon's next link repeats, that walk ends with a bad-upstream error
// after reading a listing's page twice at most; a List whose context has
// ended sends nothing.
func TestListWalkEndsOnARepeatingNextLink(t *testing.T) {
	kinds := []practice.Kind{practice.Jobs, practice.Clients, practice.People}
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			k := fixture(t)
			a, _ := newAdapter(t, k)
			k.LoopNextLinks(true)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := walkList(ctx, a, kind)
			var cycle *paging.CycleError
			if !errors.As(err, &cycle) || !errors.Is(err, practice.ErrBadUpstream) {
				t.Fatalf("list %s: %v, want a repeating next link", kind, err)
			}
			pages := map[string]int{}
			for _, r := range k.Requests() {
				if path, _, ok := strings.Cut(strings.TrimPrefix(r, "GET "), "?"); ok && strings.Count(path, "/") == 2 {
					pages[path]++
				}
			}
			for path, n := range pages {
				if n > 2 {
					t.Fatalf("list %s read %d pages of %s, a listing that repeats its first", kind, n, path)
				}
			}
		})
	}
	k := fixture(t)
	a, _ := newAdapter(t, k)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, kind := range kinds {
		if _, err := a.List(ctx, live, kind, practice.Query{Limit: 200}); !errors.Is(err, context.Canceled) || k.Faults.Hits() != 0 {
			t.Fatalf("a cancelled list of %s: %v after %d requests", kind, err, k.Faults.Hits())
		}
	}
}

// walkList pages a's List of kind to the end as the read model's backfill
// does, returning the error that ended it (nil at the end of the listing).
func walkList(ctx context.Context, a *karbon.Adapter, kind practice.Kind) error {
	cursor := ""
	for range 100 {
		p, err := a.List(ctx, live, kind, practice.Query{Limit: 200, Cursor: cursor})
		if err != nil {
			return err
		}
		if !p.HasMore {
			return nil
		}
		cursor = p.Next
	}
	return errors.New("the walk never ended")
}

// A list whose next link repeats is a bad upstream (the API's 502), not a
// page walk that never ends.
func TestListEndsOnARepeatingNextLink(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	k.LoopNextLinks(true)
	_, err := a.List(context.Background(), live, practice.Jobs, practice.Query{Limit: 50, Filter: practice.Filter{Stage: "in_review"}})
	if !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("err = %v", err)
	}
}

// Each kind of client is written back with Karbon's published PUT of its
// kind (the double checks the body against the description).
func TestUpdateEveryKindOfClient(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	ctx := context.Background()
	for _, tc := range []struct {
		id string
		in practice.ClientInput
	}{
		{"cli_c-C001", practice.ClientInput{Name: ptr("Ann Clientele"), Email: ptr("ann@clientele.example"), Status: ptr("prospect")}},
		{"cli_o-O002", practice.ClientInput{Type: ptr("trust"), Phone: ptr("+44 20 7946 0111")}},
		{"cli_g-G001", practice.ClientInput{Name: ptr("Smith Family Group"), Owner: ptr("usr_U2manager")}},
	} {
		raw, err := a.UpdateClient(ctx, live, tc.id, tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		var c practice.Client
		json.Unmarshal(raw, &c)
		if tc.in.Name != nil && c.Name != *tc.in.Name || tc.in.Email != nil && c.Email != *tc.in.Email ||
			tc.in.Owner != nil && practice.ValueOf(c.Owner) != *tc.in.Owner || tc.in.Type != nil && c.Type != *tc.in.Type {
			t.Errorf("%s after the update: %+v", tc.id, c)
		}
	}
	var puts []string
	for _, r := range k.Requests() {
		if strings.HasPrefix(r, "PUT ") {
			puts = append(puts, r)
		}
	}
	if len(puts) != 3 {
		t.Fatalf("writes: %v", puts)
	}
}
