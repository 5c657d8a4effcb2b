package api

import (
	"testing"
	"time"
)

// An answer's times carry milliseconds, as records and events do, whatever
// precision the value had; text is not HTML-escaped.
func TestAnswersPrintMilliseconds(t *testing.T) {
	at := time.Date(2026, 11, 27, 11, 50, 1, 123456789, time.UTC)
	type endpoint struct {
		URL        string     `json:"url"`
		CreatedAt  time.Time  `json:"created_at"`
		DisabledAt *time.Time `json:"disabled_at"`
		Never      *time.Time `json:"never"`
	}
	b, err := marshal(endpoint{URL: "https://x.example/a?b=1&c=<2>", CreatedAt: at, DisabledAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"url":"https://x.example/a?b=1&c=<2>","created_at":"2026-11-27T11:50:01.123Z","disabled_at":"2026-11-27T11:50:01.123Z","never":null}`
	if string(b) != want {
		t.Fatalf("marshal:\n got %s\nwant %s", b, want)
	}
}
