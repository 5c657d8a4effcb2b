package xero

import (
	"testing"
	"time"
)

func TestDecimal2(t *testing.T) {
	for in, want := range map[string]string{
		"1607.13": "1607.13", "46.0": "46.00", "40": "40.00", "0": "0.00", "0.005": "0.01", "-12.5": "-12.50",
		"148062.76": "148062.76", "2.675": "2.68", "-0.001": "0.00", ".5": "0.50", "": "0.00",
		"-0.005": "-0.01", "007.5": "7.50", "+3": "3.00", " 12.30 ": "12.30", "9999999999999999.995": "10000000000000000.00",
		"12345678901234567": "12345678901234567.00",
	} {
		got, err := decimal2(amount(in))
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"1e3", "12,50", "abc", "1.2.3", "-", "123456789012345678", "92233720368547758", "1.-5"} {
		if got, err := decimal2(amount(bad)); err == nil {
			t.Errorf("%q read as %q", bad, got)
		}
	}
}

func TestXeroTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"/Date(1541176290160+0000)/":    time.UnixMilli(1541176290160).UTC(),
		"/Date(1539993600000)/":         time.UnixMilli(1539993600000).UTC(),
		"2024-06-21T01:15:39.902":       time.Date(2024, 6, 21, 1, 15, 39, 902_000_000, time.UTC),
		"2020-02-06T12:17:43.202-08:00": time.Date(2020, 2, 6, 20, 17, 43, 202_000_000, time.UTC),
	} {
		got, err := xeroTime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := xeroTime("/Date(abc)/"); err == nil {
		t.Error("a bad date was read")
	}
}

func FuzzDecimal2(f *testing.F) {
	for _, s := range []string{"1607.13", "46.0", "-0.005", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		decimal2(amount(s)) // must not panic
		xeroTime(s)
	})
}
