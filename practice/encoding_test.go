package practice

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestMarshalWritesNamesAsWritten(t *testing.T) {
	c := Client{ID: "cli_1", Name: "Dunmore & Sons <Holdings> Ltd"}
	b, err := Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"Dunmore & Sons <Holdings> Ltd"`)) || bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("Marshal wrote %s", b)
	}
}

// Canonical of what json.Marshal wrote is what Marshal writes, for every
// string: a state an earlier version stored escaped compares equal with
// the same state read again.
func TestCanonicalIsMarshalOfEscaped(t *testing.T) {
	for _, s := range []string{
		"Birch & Co LLP", "<b>&amp;</b>", `a "quoted" \ back\slash`, "tab\tnew\nline\r", "\u2028\u2029",
		"ctl \x01\x1f \x7f", "é ü ß 日本", `literal \u003c stays`, "", "plain",
	} {
		v := map[string]any{"id": "cli_1", "name": s, "nested": []any{s, map[string]string{"k&": s}}, "n": 1.5}
		escaped, _ := json.Marshal(v)
		want, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := Canonical(escaped); !bytes.Equal(got, want) {
			t.Errorf("%q: Canonical(%s) = %s, want %s", s, escaped, got, want)
		}
		if got := Canonical(want); !bytes.Equal(got, want) {
			t.Errorf("%q: Canonical changed %s to %s", s, want, got)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"Birch & Co", "<>", "\u2028", `\u0026`, "x\x00y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			// Records hold what a vendor's JSON or XML decoded to:
			// valid UTF-8.
			t.Skip()
		}
		v := map[string]string{"name": s}
		escaped, _ := json.Marshal(v)
		want, _ := Marshal(v)
		if got := Canonical(escaped); !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%s) = %s, want %s", escaped, got, want)
		}
	})
}
