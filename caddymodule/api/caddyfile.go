package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

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
//	    deprecated <METHOD> <path> <since YYYY-MM-DD> <sunset YYYY-MM-DD> [<link>]
//	}
//
// deprecated may repeat; path is the route's pattern, such as
// /v1/jobs/{id}/stage.
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
		case "deprecated":
			args := d.RemainingArgs()
			if len(args) != 4 && len(args) != 5 {
				return d.ArgErr()
			}
			dep := Deprecation{Method: strings.ToUpper(args[0]), Path: args[1]}
			var err error
			if dep.Since, err = time.Parse(time.DateOnly, args[2]); err != nil {
				return d.Errf("deprecated: since date: %v", err)
			}
			if dep.Sunset, err = time.Parse(time.DateOnly, args[3]); err != nil {
				return d.Errf("deprecated: sunset date: %v", err)
			}
			if len(args) == 5 {
				dep.Link = args[4]
			}
			if http.MethodGet != dep.Method && http.MethodPost != dep.Method && http.MethodPatch != dep.Method {
				return d.Errf("deprecated: method %q is not one the API serves", args[0])
			}
			h.Deprecated = append(h.Deprecated, dep)
		default:
			return d.Errf("unknown practicegw_api option %q", d.Val())
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
