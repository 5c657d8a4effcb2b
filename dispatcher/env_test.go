package dispatcher

import (
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	if d, err := ParseRetention("off"); err != nil || d >= 0 {
		t.Errorf(`ParseRetention("off") = %s, %v; want negative`, d, err)
	}
	if d, err := ParseRetention("720h"); err != nil || d != DefaultRetention {
		t.Errorf(`ParseRetention("720h") = %s, %v`, d, err)
	}
	for _, in := range []string{"", "0", "-1h", "never"} {
		if _, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) accepted", in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "1d": 24 * time.Hour, "0.5d": 12 * time.Hour, "2d3h4m": 51*time.Hour + 4*time.Minute, "150ms": 150 * time.Millisecond,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "1dx", "-1d", "1h2d"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
}
