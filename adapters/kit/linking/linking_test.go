package linking_test

import (
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/linking"
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
