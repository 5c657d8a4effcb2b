package dispatcher

import (
	"net/netip"
	"testing"
	"time"
)

func TestEnvConfig(t *testing.T) {
	env := map[string]string{
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE":     "1m30s",
		"PRACTICEGW_WEBHOOK_BACKOFF_FACTOR":   "4.5",
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS":      " 10.0.0.0/8, fd00::/8 ,",
		"PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN": "1d2h",
		"PRACTICEGW_WEBHOOK_RETENTION":        "90d",
	}
	cfg, err := EnvConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BackoffBase != 90*time.Second || cfg.BackoffFactor != 4.5 || cfg.BreakerCooldown != 26*time.Hour || cfg.Retention != 90*24*time.Hour ||
		len(cfg.AllowCIDRs) != 2 || cfg.AllowCIDRs[1] != netip.MustParsePrefix("fd00::/8") {
		t.Fatalf("EnvConfig = %+v", cfg)
	}
	if cfg, err := EnvConfig(func(string) string { return "" }); err != nil || cfg.BackoffBase != 0 || cfg.AllowCIDRs != nil {
		t.Fatalf("empty environment: %+v, %v", cfg, err)
	}
	for name, bad := range map[string]string{
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE":     "-1s",
		"PRACTICEGW_WEBHOOK_BACKOFF_FACTOR":   "0.5",
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS":      "10.0.0.0",
		"PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN": "xd",
		"PRACTICEGW_WEBHOOK_RETENTION":        "0s",
	} {
		if _, err := EnvConfig(func(k string) string {
			if k == name {
				return bad
			}
			return ""
		}); err == nil {
			t.Errorf("%s=%q was accepted", name, bad)
		}
	}
}

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
