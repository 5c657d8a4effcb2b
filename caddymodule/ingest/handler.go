// Package ingest mounts the webhook receivers of a firm's own systems
// (Karbon, Xero), which turn the vendors' change notifications into change
// records for the event pipeline. Vendors sign their notifications; the
// adapter verifies the signature, so these routes sit outside
// practicegw_auth.
package ingest

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("practicegw_ingest", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("practicegw_ingest", httpcaddyfile.Before, "basic_auth")
}

// Handler is the practicegw_ingest handler.
type Handler struct {
	// Firm whose system sends the webhooks.
	Firm string `json:"firm"`
	// Role of that system: "records" (Karbon) or "ledger" (Xero).
	Role string `json:"role"`

	receiver http.Handler
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.practicegw_ingest",
		New: func() caddy.Module { return new(Handler) },
	}
}

type ingestHost interface {
	IngestHandler(firm, role string) (http.Handler, error)
}

// Provision finds the firm's system in the practicegw app.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := ctx.App("practicegw")
	if err != nil {
		return fmt.Errorf("practicegw_ingest needs the practicegw app: %w", err)
	}
	host, ok := app.(ingestHost)
	if !ok {
		return fmt.Errorf("practicegw app %T has no ingest receivers", app)
	}
	h.receiver, err = host.IngestHandler(h.Firm, h.Role)
	if err != nil {
		return fmt.Errorf("practicegw_ingest %s %s: %w", h.Firm, h.Role, err)
	}
	return nil
}

// Validate checks a JSON config as the Caddyfile parser checks its own.
func (h *Handler) Validate() error {
	if h.Firm == "" {
		return fmt.Errorf("practicegw_ingest: firm is required")
	}
	if h.Role != "records" && h.Role != "ledger" {
		return fmt.Errorf("practicegw_ingest: role %q: want records or ledger", h.Role)
	}
	return nil
}

// ServeHTTP hands the vendor's notification to the adapter's receiver.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h.receiver.ServeHTTP(w, r)
	return nil
}

// parseCaddyfile sets up the handler. Syntax:
//
//	practicegw_ingest <firm> records|ledger
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	return &handler, handler.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if !d.Args(&h.Firm, &h.Role) || d.NextArg() {
		return d.ArgErr()
	}
	if h.Role != "records" && h.Role != "ledger" {
		return d.Errf("role %q: want records or ledger", h.Role)
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
