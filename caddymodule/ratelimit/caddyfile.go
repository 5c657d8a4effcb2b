package ratelimit

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("practicegw_ratelimit", parseCaddyfile)
	// After practicegw_auth, which places the credential this reads. Order
	// may only name a standard directive; auth sits before basic_auth, so
	// after basic_auth is after auth whatever order init runs in.
	httpcaddyfile.RegisterDirectiveOrder("practicegw_ratelimit", httpcaddyfile.After, "basic_auth")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var rl Handler
	err := rl.UnmarshalCaddyfile(h.Dispenser)
	return &rl, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	practicegw_ratelimit [<default>] {
//	    default  <N/s|N/m|N/h>
//	    burst    <n>
//	    redis    <redis://host:port/db>
//	    timeout  <duration>
//	    batch_interval <duration>|off
//	    fallback local|allow|deny
//	}
//
// Every setting is optional; see Handler for the defaults. For example:
//
//	practicegw_ratelimit {
//	    default  7200/h
//	    burst    100
//	    redis    redis://127.0.0.1:6379/0
//	    timeout  50ms
//	    fallback local
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		if err := h.setDefault(d, d.Val()); err != nil {
			return err
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for d.NextBlock(0) {
		name := d.Val()
		if !d.NextArg() {
			return d.ArgErr()
		}
		val := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		switch name {
		case "default":
			if err := h.setDefault(d, val); err != nil {
				return err
			}
		case "burst":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 1 {
				return d.Errf("burst %q: want a whole number of at least 1", val)
			}
			h.Burst = n
		case "redis":
			h.Redis = val
		case "timeout":
			t, err := caddy.ParseDuration(val)
			if err != nil || t <= 0 {
				return d.Errf("timeout %q: want a positive duration such as 50ms", val)
			}
			h.Timeout = caddy.Duration(t)
		case "batch_interval":
			if val == "off" {
				h.BatchInterval = 0
				break
			}
			t, err := caddy.ParseDuration(val)
			if err != nil || t <= 0 {
				return d.Errf("batch_interval %q: want a positive duration such as 500us, or off", val)
			}
			h.BatchInterval = caddy.Duration(t)
		case "fallback":
			if err := Fallback(val).check(); err != nil {
				return d.Err(err.Error())
			}
			h.Fallback = val
		default:
			return d.Errf("unknown setting %q; want default, burst, redis, timeout, batch_interval or fallback", name)
		}
	}
	return nil
}

// setDefault checks a literal rate now, so a typo fails at adapt time;
// one with a placeholder is checked when Provision expands it.
func (h *Handler) setDefault(d *caddyfile.Dispenser, val string) error {
	if !strings.Contains(val, "{") {
		if _, err := ParseRate(val); err != nil {
			return d.Err(err.Error())
		}
	}
	h.Default = val
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)
