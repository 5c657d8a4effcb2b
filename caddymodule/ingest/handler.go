// Package ingest is the one front door of vendor webhooks: the change
// notifications of a firm's own systems, which their adapters turn into
// change records for the event pipeline. Vendors sign their notifications
// and the adapter verifies the signature, so these routes sit outside
// practicegw_auth. practicegw_ingest serves
//
//	/ingest/<firm>/<system>                the system a firm's Caddyfile block names
//	/connect/webhooks/<app>                a connect app's one address, for every
//	                                       organisation connected through it (Xero)
//	/connect/webhooks/<system>/<connection> the subscriptions the gateway made for a
//	                                       connection (Karbon)
//
// and, given a firm and a role, the one system's receiver wherever it is
// mounted. What receives each is the vendor's module's; this package
// names no vendor.
package ingest

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/practicegw/practicegw/caddymodule/apierror"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("practicegw_ingest", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("practicegw_ingest", httpcaddyfile.Before, "basic_auth")
}

// Handler is the practicegw_ingest handler. Without Firm and Role it
// serves every vendor webhook by its path; with them, the receiver of that
// firm's system in that role, wherever the Caddyfile mounts it.
type Handler struct {
	// Firm whose system sends the webhooks.
	Firm string `json:"firm,omitempty"`
	// Role of that system: "records" or "ledger".
	Role string `json:"role,omitempty"`

	receiver http.Handler
	host     frontDoor
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.practicegw_ingest",
		New: func() caddy.Module { return new(Handler) },
	}
}

// What the practicegw app gives the front door.
type (
	// ingestHost finds the receiver of a firm's system by its role.
	ingestHost interface {
		IngestHandler(firm, role string) (http.Handler, error)
	}
	// frontDoor finds the receiver of a webhook by its address.
	frontDoor interface {
		// FirmWebhook is the receiver of the system named system that
		// the firm's Caddyfile block names; false when none sends
		// webhooks.
		FirmWebhook(firm, system string) (http.Handler, bool)
		// ConnectionWebhook is the receiver of a connect app's one
		// address (connection "") or of one connection's subscriptions;
		// false when there is none here.
		ConnectionWebhook(system, connection string) (http.Handler, bool)
	}
)

// Provision finds the firm's system in the practicegw app, or the app's
// receivers for the front door.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := ctx.App("practicegw")
	if err != nil {
		return fmt.Errorf("practicegw_ingest needs the practicegw app: %w", err)
	}
	if h.Firm == "" && h.Role == "" {
		door, ok := app.(frontDoor)
		if !ok {
			return fmt.Errorf("practicegw app %T has no vendor webhook receivers", app)
		}
		h.host = door
		return nil
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
	if h.Firm == "" && h.Role == "" {
		return nil
	}
	if h.Firm == "" {
		return fmt.Errorf("practicegw_ingest: firm is required with a role")
	}
	if h.Role != "records" && h.Role != "ledger" {
		return fmt.Errorf("practicegw_ingest: role %q: want records or ledger", h.Role)
	}
	return nil
}

// ServeHTTP hands the vendor's notification to the receiver its address
// names.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if h.receiver != nil {
		h.receiver.ServeHTTP(w, r)
		return nil
	}
	receiver, ok := h.route(r.URL.Path)
	if !ok {
		apierror.Write(w, r, apierror.New(http.StatusNotFound, "resource_not_found",
			"Nothing of this gateway receives vendor webhooks at this address: a firm's system is at /ingest/<firm>/<system>, a connection's at the address the gateway gave its vendor."))
		return nil
	}
	receiver.ServeHTTP(w, r)
	return nil
}

// route is the receiver of the webhooks sent to path.
func (h *Handler) route(path string) (http.Handler, bool) {
	if rest, ok := strings.CutPrefix(path, "/ingest/"); ok {
		if seg := strings.Split(rest, "/"); len(seg) == 2 && seg[0] != "" && seg[1] != "" {
			return h.host.FirmWebhook(seg[0], seg[1])
		}
		return nil, false
	}
	if rest, ok := strings.CutPrefix(path, "/connect/webhooks/"); ok {
		switch seg := strings.Split(rest, "/"); {
		case len(seg) == 1 && seg[0] != "":
			return h.host.ConnectionWebhook(seg[0], "")
		case len(seg) == 2 && seg[0] != "" && seg[1] != "":
			return h.host.ConnectionWebhook(seg[0], seg[1])
		}
	}
	return nil, false
}

// parseCaddyfile sets up the handler. Syntax:
//
//	practicegw_ingest [<firm> records|ledger]
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	return &handler, handler.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	args := d.RemainingArgs()
	switch len(args) {
	case 0:
		return nil
	case 2:
		h.Firm, h.Role = args[0], args[1]
	default:
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
