package console

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("practicegw_console", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("practicegw_console", httpcaddyfile.Before, "basic_auth")
}

// parseCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	practicegw_console {
//	    session_ttl <duration>
//	}
//
// It serves /console and everything under it, so it normally sits in
// handle /console* { ... }.
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	return &handler, handler.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "session_ttl":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			ttl, err := caddy.ParseDuration(v)
			if err != nil || ttl <= 0 {
				return d.Errf("session_ttl: %q is not a positive duration", v)
			}
			h.SessionTTL = caddy.Duration(ttl)
		default:
			return d.Errf("unknown practicegw_console option %q", d.Val())
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
