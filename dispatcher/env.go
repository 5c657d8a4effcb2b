package dispatcher

// The parsers of the delivery settings' written forms, which the gateway's
// configuration and practicegw dispatcher share (both through
// caddymodule/gateway, from the environment's table in
// internal/envconfig).

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

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
