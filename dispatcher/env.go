package dispatcher

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// EnvConfig reads the engine settings every practicegw process shares
// (docs/CONTRACT.md section 1) through getenv, usually os.Getenv:
//
//	PRACTICEGW_WEBHOOK_BACKOFF_BASE      delay before the first retry (30s)
//	PRACTICEGW_WEBHOOK_BACKOFF_FACTOR    growth of each later delay (6)
//	PRACTICEGW_WEBHOOK_ALLOW_CIDRS       CIDRs exempt from the address block
//	PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN  how long an open breaker pauses (1m)
//	PRACTICEGW_WEBHOOK_RETENTION         how long the webhook log is kept (720h), or off
//
// Durations are Go durations, plus whole or fractional days ("1d12h").
// Unset variables leave the Config field zero, which New fills with the
// default.
func EnvConfig(getenv func(string) string) (Config, error) {
	var cfg Config
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	if v := get("PRACTICEGW_WEBHOOK_BACKOFF_BASE"); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("PRACTICEGW_WEBHOOK_BACKOFF_BASE %q is not a positive duration", v)
		}
		cfg.BackoffBase = d
	}
	if v := get("PRACTICEGW_WEBHOOK_BACKOFF_FACTOR"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 1 {
			return cfg, fmt.Errorf("PRACTICEGW_WEBHOOK_BACKOFF_FACTOR %q must be a number of at least 1", v)
		}
		cfg.BackoffFactor = f
	}
	if v := get("PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN"); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN %q is not a positive duration", v)
		}
		cfg.BreakerCooldown = d
	}
	if v := get("PRACTICEGW_WEBHOOK_RETENTION"); v != "" {
		d, err := ParseRetention(v)
		if err != nil {
			return cfg, fmt.Errorf("PRACTICEGW_WEBHOOK_RETENTION: %w", err)
		}
		cfg.Retention = d
	}
	if v := get("PRACTICEGW_WEBHOOK_MAX_ENDPOINTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("PRACTICEGW_WEBHOOK_MAX_ENDPOINTS %q must be a positive number", v)
		}
		cfg.MaxEndpoints = n
	}
	if v := get("PRACTICEGW_WEBHOOK_MAX_IN_FLIGHT_PER_FIRM"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("PRACTICEGW_WEBHOOK_MAX_IN_FLIGHT_PER_FIRM %q must be a positive number", v)
		}
		cfg.MaxInFlightPerFirm = n
	}
	cidrs, err := ParseCIDRs(get("PRACTICEGW_WEBHOOK_ALLOW_CIDRS"))
	if err != nil {
		return cfg, fmt.Errorf("PRACTICEGW_WEBHOOK_ALLOW_CIDRS: %w", err)
	}
	cfg.AllowCIDRs = cidrs
	return cfg, nil
}

// ParseRetention reads a retention period: a positive duration, or "off"
// to keep the webhook log for ever (a negative Config.Retention).
func ParseRetention(s string) (time.Duration, error) {
	if s == "off" {
		return -1, nil
	}
	d, err := ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is neither a positive duration nor off", s)
	}
	return d, nil
}

// ParseCIDRs reads a comma-separated list of CIDRs.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("CIDR %q: %w", part, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseDuration is time.ParseDuration with days: a leading "<n>d", as
// Caddy's durations allow, so one environment file serves the gateway's
// Caddyfile and the dispatcher alike.
func ParseDuration(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	d := time.Duration(n * float64(24*time.Hour))
	if rest == "" {
		return d, nil
	}
	r, err := time.ParseDuration(rest)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return d + r, nil
}
