package api

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("practicegw_api", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("practicegw_api", httpcaddyfile.Before, "respond")
}

// parseCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	practicegw_api {
//	    max_body_bytes <n>
//	}
//
// Deprecated routes are marked on the practicegw global option, since
// every practicegw_api handler and the OpenAPI document must agree.
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
		case "max_body_bytes":
			var n string
			if !d.AllArgs(&n) {
				return d.ArgErr()
			}
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil || v < 1 {
				return d.Errf("max_body_bytes: %q is not a positive whole number", n)
			}
			h.MaxBodyBytes = v
		default:
			return d.Errf("unknown practicegw_api option %q", d.Val())
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
