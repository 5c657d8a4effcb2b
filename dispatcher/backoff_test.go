package dispatcher

import (
	"net/http"
	"testing"
	"time"
)

func TestDefaultScheduleSpansTwelveHours(t *testing.T) {
	s := Schedule{Base: DefaultBackoffBase, Factor: DefaultBackoffFactor}
	want := []time.Duration{30 * time.Second, 3 * time.Minute, 18 * time.Minute, 108 * time.Minute, 648 * time.Minute}
	var span time.Duration
	for n := 1; n < maxAttempts; n++ {
		if got := s.MinDelay(n); got != want[n-1] {
			t.Errorf("MinDelay(%d) = %s, want %s", n, got, want[n-1])
		}
		span += s.MinDelay(n)
	}
	// Jitter only lengthens delays, so the jitter-free span is the minimum.
	if span < 12*time.Hour {
		t.Fatalf("six attempts span %s; the contract asks for at least 12h", span)
	}
}

func TestDelayJitterIsUpwardAndBounded(t *testing.T) {
	s := Schedule{Base: 10 * time.Second, Factor: 3}
	for n := 1; n < maxAttempts; n++ {
		lo := s.MinDelay(n)
		hi := lo + lo/5
		seen := map[time.Duration]bool{}
		for range 200 {
			d := s.Delay(n)
			if d < lo || d >= hi {
				t.Fatalf("Delay(%d) = %s, want in [%s, %s)", n, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("Delay(%d) took only %d values; jitter is missing", n, len(seen))
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"100000", maxRetryAfter, true},
		{"99999999999999999", maxRetryAfter, true},
		{now.Add(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{now.Add(72 * time.Hour).Format(http.TimeFormat), maxRetryAfter, true},
		{"", 0, false},
		{"-5", 0, false},
		{"soon", 0, false},
		{"1.5", 0, false},
	}
	for _, tt := range tests {
		got, ok := retryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%q) = %s, %v; want %s, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
