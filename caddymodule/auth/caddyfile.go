package auth

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("practicegw_auth", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("practicegw_auth", httpcaddyfile.Before, "basic_auth")
}

// parseCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	practicegw_auth
//
// It takes no arguments: credentials and signing keys are configured on
// the practicegw global option.
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
	if d.NextBlock(0) {
		return d.Errf("practicegw_auth takes no options")
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Handler)(nil)
