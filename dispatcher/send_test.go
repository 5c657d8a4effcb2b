package dispatcher

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReadExcerpt(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"short", "ok", "ok"},
		{"exactly the limit", strings.Repeat("a", maxExcerpt), strings.Repeat("a", maxExcerpt)},
		{"over the limit", strings.Repeat("a", 5000), strings.Repeat("a", maxExcerpt)},
		// A three-byte rune straddling the limit is dropped, not split.
		{"rune cut at the limit", strings.Repeat("a", maxExcerpt-1) + "€", strings.Repeat("a", maxExcerpt-1)},
		{"invalid bytes", "ok\xff\xfeok", "ok\uFFFDok"},
	}
	for _, tt := range tests {
		got := readExcerpt(strings.NewReader(tt.body))
		if got != tt.want {
			t.Errorf("%s: got %d bytes %q…", tt.name, len(got), got[:min(len(got), 20)])
		}
		if len(got) > maxExcerpt || !utf8.ValidString(got) {
			t.Errorf("%s: excerpt of %d bytes, valid %v", tt.name, len(got), utf8.ValidString(got))
		}
	}
}

func TestAttemptLabel(t *testing.T) {
	if got := (Attempt{Number: 3, Trigger: TriggerScheduled}).Label(); got != "attempt 3 of 6" {
		t.Errorf("Label = %q", got)
	}
	if got := (Attempt{Number: 7, Trigger: TriggerReplay}).Label(); got != "attempt 7 (replay)" {
		t.Errorf("Label = %q", got)
	}
}
