package linking_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

func TestNormalisation(t *testing.T) {
	for in, want := range map[string]string{"  Ada   Client ": "ada client", "ADA CLIENT.": "ada client", "Birch & Co, LLP": "birch & co llp", "": ""} {
		if got := linking.Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{" Books@Ada.Example ": "books@ada.example", "not an address": "", "@x": "", "a@": ""} {
		if got := linking.Email(in); got != want {
			t.Errorf("Email(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"GB 123 456 789": "GB123456789", "12-345-678": "12345678", "n/a": "", "0": ""} {
		if got := linking.TaxNumber(in); got != want {
			t.Errorf("TaxNumber(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatch(t *testing.T) {
	d := linking.NewDirectory([]linking.Entry{
		{ID: "cli_ada", Name: "Ada Client", Email: "ada@example.com", TaxNumber: "GB111111111", Refs: []string{"xc-ada"}},
		{ID: "cli_birch", Name: "Birch & Co", Email: "office@birch.example"},
		{ID: "cli_twin1", Name: "Twin Ltd", Email: "shared@twins.example"},
		{ID: "cli_twin2", Name: "Twin Ltd", Email: "shared@twins.example", TaxNumber: "GB222222222"},
		{ID: "cli_keyed1", Refs: []string{"xc-dup"}, Name: "Keyed One"},
		{ID: "cli_keyed2", Refs: []string{"xc-dup"}, Name: "Keyed Two"},
	})
	cases := []struct {
		name string
		c    linking.Candidate
		want linking.Link
	}{
		{"cross-reference", linking.Candidate{External: "xc-ada", Name: "Someone Else"}, linking.Link{Client: "cli_ada", Outcome: linking.Linked}},
		{"cross-reference before the name", linking.Candidate{External: "xc-ada", Name: "Birch & Co"}, linking.Link{Client: "cli_ada", Outcome: linking.Linked}},
		{"duplicated cross-reference", linking.Candidate{External: "xc-dup", Name: "Keyed One"}, linking.Link{Outcome: linking.Ambiguous}},
		{"unknown cross-reference, then the name", linking.Candidate{External: "xc-new", Name: "birch  & CO."}, linking.Link{Client: "cli_birch", Outcome: linking.Linked}},
		{"name", linking.Candidate{Name: "ADA CLIENT"}, linking.Link{Client: "cli_ada", Outcome: linking.Linked}},
		{"email", linking.Candidate{Email: "Office@Birch.example"}, linking.Link{Client: "cli_birch", Outcome: linking.Linked}},
		{"tax number", linking.Candidate{TaxNumber: "gb 111 111 111"}, linking.Link{Client: "cli_ada", Outcome: linking.Linked}},
		{"a name two clients share", linking.Candidate{Name: "Twin Ltd"}, linking.Link{Outcome: linking.Ambiguous}},
		{"a shared name, told apart by a tax number", linking.Candidate{Name: "Twin Ltd", TaxNumber: "GB222222222"}, linking.Link{Client: "cli_twin2", Outcome: linking.Linked}},
		{"keys that disagree", linking.Candidate{Name: "Ada Client", Email: "office@birch.example"}, linking.Link{Outcome: linking.Ambiguous}},
		{"a unique key against a shared one it is not in", linking.Candidate{Name: "Birch & Co", Email: "shared@twins.example"}, linking.Link{Outcome: linking.Ambiguous}},
		{"nothing", linking.Candidate{Name: "Nobody", Email: "nobody@example.com"}, linking.Link{Outcome: linking.Missing}},
		{"no keys", linking.Candidate{}, linking.Link{Outcome: linking.Missing}},
	}
	for _, tc := range cases {
		if got := d.Match(tc.c); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if got := d.Match(tc.c).Ref(); (got != nil) != (tc.want.Outcome == linking.Linked) {
			t.Errorf("%s: ref %v", tc.name, got)
		}
	}
}

func TestTallyCountsEachCandidateByItsLastAnswer(t *testing.T) {
	var tally linking.Tally
	tally.Note("a", linking.Missing)
	tally.Note("a", linking.Linked)
	tally.Note("b", linking.Missing)
	tally.Note("c", linking.Ambiguous)
	tally.Note("", linking.Missing)
	if got := tally.Counts(); got != (linking.Counts{Candidates: 3, Linked: 1, Missing: 1, Ambiguous: 1}) || tally.Unlinked() != 2 {
		t.Fatalf("%+v", got)
	}
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// A record's version moves when only its link changes, stays put when
// it is read again, and a newer vendor state ranks above the stamp.
func TestVersionsMoveWithTheLink(t *testing.T) {
	ctx := context.Background()
	tenant := practice.Tenant{Firm: "f"}
	state := changes.NewMemoryState()
	clk := &clock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	v := &linking.Versions{State: state, Clock: clk, Prefix: "test/"}
	vendorAt := clk.now.Add(-time.Hour)
	mapped := func(client *string, at time.Time) practice.Invoice {
		t.Helper()
		inv := practice.Invoice{ID: "inv_1", Object: "invoice", Client: client, Status: "issued", CreatedAt: at, UpdatedAt: at,
			Version: practice.VersionAt(at)}
		if err := v.Settle(ctx, tenant, practice.Invoices, inv.ID, &inv.Version, &inv.UpdatedAt, &inv); err != nil {
			t.Fatal(err)
		}
		return inv
	}
	keep := func(inv practice.Invoice) {
		raw, _ := json.Marshal(inv)
		if err := state.Save(ctx, changes.StateKey(tenant, practice.Invoices, inv.ID), raw); err != nil {
			t.Fatal(err)
		}
	}
	first := mapped(nil, vendorAt)
	if first.Version != practice.VersionAt(vendorAt) {
		t.Fatalf("first read: %d", first.Version)
	}
	keep(first)
	if again := mapped(nil, vendorAt); again.Version != first.Version {
		t.Fatalf("read again unchanged: %d", again.Version)
	}
	id := "cli_ada"
	linked := mapped(&id, vendorAt)
	if linked.Version <= first.Version || !linked.UpdatedAt.Equal(clk.now) {
		t.Fatalf("linked later: %+v", linked)
	}
	keep(linked)
	clk.now = clk.now.Add(time.Minute)
	if again := mapped(&id, vendorAt); again.Version != linked.Version {
		t.Fatalf("linked, read again: %d, want %d", again.Version, linked.Version)
	}
	// An older vendor state read late keeps its own version (dropped as
	// older); a vendor edit made before the stamp but read after ranks
	// above it.
	if old := mapped(nil, vendorAt.Add(-time.Hour)); old.Version != practice.VersionAt(vendorAt.Add(-time.Hour)) {
		t.Fatalf("stale read: %d", old.Version)
	}
	edited := vendorAt.Add(30 * time.Minute)
	later := practice.Invoice{ID: "inv_1", Object: "invoice", Client: &id, Status: "paid", CreatedAt: vendorAt, UpdatedAt: edited,
		Version: practice.VersionAt(edited)}
	if err := v.Settle(ctx, tenant, practice.Invoices, later.ID, &later.Version, &later.UpdatedAt, &later); err != nil {
		t.Fatal(err)
	}
	if later.Version <= linked.Version {
		t.Fatalf("an edit read after the stamp: %d, stamp %d", later.Version, linked.Version)
	}
	keep(later)
	newest := vendorAt.Add(2 * time.Hour)
	if n := mapped(&id, newest); n.Version != practice.VersionAt(newest) {
		t.Fatalf("a newer vendor state: %d", n.Version)
	}
}
