package ratelimit

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    Rate
		wantErr string
	}{
		{in: "7200/h", want: Rate{Limit: 7200, Window: time.Hour}},
		{in: "10/s", want: Rate{Limit: 10, Window: time.Second}},
		{in: "60/m", want: Rate{Limit: 60, Window: time.Minute}},
		{in: " 1/s ", want: Rate{Limit: 1, Window: time.Second}},
		{in: "1000000/s", want: Rate{Limit: 1000000, Window: time.Second}},
		{in: "", wantErr: "want N/s, N/m or N/h"},
		{in: "7200", wantErr: "want N/s, N/m or N/h"},
		{in: "7200/d", wantErr: `unit "d" is not s, m or h`},
		{in: "7200/H", wantErr: `unit "H" is not s, m or h`},
		{in: "7200/hour", wantErr: `unit "hour"`},
		{in: "0/h", wantErr: "at least 1"},
		{in: "-5/h", wantErr: "at least 1"},
		{in: "+5/h", wantErr: "at least 1"},
		{in: "1.5/s", wantErr: "at least 1"},
		{in: "/s", wantErr: "at least 1"},
		{in: "99999999999999999999/h", wantErr: "at least 1"},
		{in: "1000001/s", wantErr: "microsecond"},
		{in: "10/s/s", wantErr: "unit"},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRate(%q) error = %v, want one saying %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"7200/h", "10/s", "60/m", "0/s", "1/x", "", "/", "9223372036854775807/h", "-1/m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if r.Limit < 1 || (r.Window != time.Second && r.Window != time.Minute && r.Window != time.Hour) {
			t.Fatalf("ParseRate(%q) = %+v: out of range", s, r)
		}
		c := r.cell()
		if c.Interval < 1 || c.Tolerance < c.Interval {
			t.Fatalf("ParseRate(%q) gives cell %+v", s, c)
		}
		back, err := ParseRate(r.String())
		if err != nil || back != r {
			t.Fatalf("String() of %q = %q, which reads back as %+v, %v", s, r.String(), back, err)
		}
	})
}

func TestCellRoundsIntervalUp(t *testing.T) {
	// 7/s cannot be split into whole microseconds; rounding down would
	// let an eighth request a second through over a long enough run.
	c := Rate{Limit: 7, Window: time.Second}.cell()
	if c.Interval*7 < int64(time.Second/time.Microsecond) {
		t.Fatalf("interval %dµs × 7 is shorter than the window", c.Interval)
	}
	if got := (Rate{Limit: 10, Window: time.Second, Burst: 50}).cell(); got.Tolerance != 10*got.Interval {
		t.Fatalf("a burst above the limit must be capped at the limit, got tolerance %d", got.Tolerance)
	}
}
