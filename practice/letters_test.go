package practice

import (
	"testing"
	"time"
)

func TestLinkLetters(t *testing.T) {
	day := func(n int) time.Time { return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n) }
	letter := func(id string, at time.Time) Letter {
		return Letter{ID: id, Client: "cli_1", Kind: LetterKind, At: at}
	}
	for _, tc := range []struct {
		name        string
		vendor      string
		letters     []Letter
		want        string
		wantChanged bool
	}{
		{"none", "", nil, "", false},
		{"the only one, 30 days after", "", []Letter{letter("doc_1", day(30))}, "doc_1", true},
		{"the only one, 30 days before", "", []Letter{letter("doc_1", day(-30))}, "doc_1", true},
		{"a second outside the window", "", []Letter{letter("doc_1", day(3)), letter("doc_2", day(31))}, "doc_1", true},
		{"31 days after", "", []Letter{letter("doc_1", day(30).Add(time.Second))}, "", false},
		{"two within", "", []Letter{letter("doc_1", day(3)), letter("doc_2", day(-3))}, "", false},
		{"another client's", "", []Letter{{ID: "doc_1", Client: "cli_2", Kind: LetterKind, At: day(0)}}, "", false},
		{"named by the document, however old", "", []Letter{letter("doc_1", day(1)), {ID: "doc_2", Client: "cli_1", Kind: LetterKind, Engagement: "eng_1", At: day(-400)}}, "doc_2", true},
		{"naming another engagement", "", []Letter{{ID: "doc_1", Client: "cli_1", Kind: LetterKind, Engagement: "eng_2", At: day(0)}}, "", false},
		{"named by the vendor", "doc_9", []Letter{letter("doc_1", day(0))}, "doc_9", false},
	} {
		e := Engagement{ID: "eng_1", Client: Known("cli_1"), CreatedAt: KnownAt(day(0)), LetterDocument: Known(tc.vendor)}
		changed := LinkLetters(&e, tc.letters, []Dated{{ID: e.ID, At: *e.CreatedAt}})
		if ValueOf(e.LetterDocument) != tc.want || changed != tc.wantChanged {
			t.Errorf("%s: letter %v changed %v, want %q changed %v", tc.name, e.LetterDocument, changed, tc.want, tc.wantChanged)
		}
		if tc.want == "" && e.LetterDocument != nil {
			t.Errorf("%s: letter %q, want null", tc.name, *e.LetterDocument)
		}
	}
	// Each kind links its own field.
	e := Engagement{ID: "eng_1", Client: Known("cli_1"), CreatedAt: KnownAt(day(0))}
	LinkLetters(&e, []Letter{{ID: "doc_1", Client: "cli_1", Kind: SignedLetterKind, At: day(2)}, letter("doc_2", day(-2))}, nil)
	if ValueOf(e.LetterDocument) != "doc_2" || e.SignedDocument != "doc_1" {
		t.Errorf("letter %v signed %q, want doc_2 and doc_1", e.LetterDocument, e.SignedDocument)
	}

	// An engagement whose system gives no date has no letter near it (one
	// naming it still links), and one beside it could be anywhere.
	undated := Engagement{ID: "eng_1", Client: Known("cli_1")}
	if LinkLetters(&undated, []Letter{letter("doc_1", day(0))}, nil) || undated.LetterDocument != nil {
		t.Errorf("an undated engagement linked %v", undated.LetterDocument)
	}
	named := Letter{ID: "doc_2", Client: "cli_1", Kind: LetterKind, Engagement: "eng_1", At: day(0)}
	if !LinkLetters(&undated, []Letter{named}, nil) || ValueOf(undated.LetterDocument) != "doc_2" {
		t.Errorf("an undated engagement named by its letter linked %v", undated.LetterDocument)
	}
	beside := Engagement{ID: "eng_1", Client: Known("cli_1"), CreatedAt: KnownAt(day(0))}
	if LinkLetters(&beside, []Letter{letter("doc_1", day(1))}, []Dated{{ID: "eng_1", At: day(0)}, {ID: "eng_2"}}) {
		t.Errorf("a letter beside an undated engagement linked %v", beside.LetterDocument)
	}

	// A letter as near another engagement of the client is either's, so
	// neither's; one nearer this engagement only is this one's.
	for _, tc := range []struct {
		name  string
		other time.Time
		want  string
	}{
		{"another engagement 10 days after", day(10), ""},
		{"another engagement 31 days after the letter", day(36), "doc_1"},
	} {
		e := Engagement{ID: "eng_1", Client: Known("cli_1"), CreatedAt: KnownAt(day(0))}
		LinkLetters(&e, []Letter{letter("doc_1", day(5))}, []Dated{{ID: "eng_1", At: day(0)}, {ID: "eng_2", At: tc.other}})
		if ValueOf(e.LetterDocument) != tc.want {
			t.Errorf("%s: letter %v, want %q", tc.name, e.LetterDocument, tc.want)
		}
	}
}

func ref(id string) *string { return &id }
