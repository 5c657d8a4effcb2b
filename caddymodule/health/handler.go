// Package health answers liveness and readiness probes: /healthz says the
// process serves, /readyz says whether the systems it depends on (Redis,
// Kafka, upstream breakers) let it do its work.
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("practicegw_health", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("practicegw_health", httpcaddyfile.Before, "basic_auth")
}

// Check is one dependency's state.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Critical checks failing make the instance not ready; others (such
	// as one upstream's breaker) are reported but keep it in rotation,
	// since it can still serve every other firm and route.
	Critical bool `json:"critical"`
	// Detail says what is wrong in words fit for anyone who can reach the
	// probe; Err is the error behind it, for the log and the admin
	// endpoint only (it can name hosts, users and versions).
	Detail string `json:"detail,omitempty"`
	Err    error  `json:"-"`
}

// Checker reports the state of what an instance depends on.
type Checker interface {
	Readiness(ctx context.Context) []Check
}

// Handler is the practicegw_health handler. It answers /healthz and
// /readyz (by the last path segment) and passes anything else on.
type Handler struct {
	// Timeout bounds a readiness check. Default 2s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	checker Checker
	logger  *zap.Logger

	failing *failing
}

// failing remembers the checks that failed at the last probe, so that a
// check is logged when it starts or stops failing.
type failing struct {
	mu    sync.Mutex
	names map[string]bool
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.practicegw_health",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision finds the practicegw app's checks.
func (h *Handler) Provision(ctx caddy.Context) error {
	if h.Timeout == 0 {
		h.Timeout = caddy.Duration(2 * time.Second)
	}
	app, err := ctx.App("practicegw")
	if err != nil {
		return fmt.Errorf("practicegw_health needs the practicegw app: %w", err)
	}
	c, ok := app.(Checker)
	if !ok {
		return fmt.Errorf("practicegw app %T reports no readiness", app)
	}
	h.checker = c
	h.logger = ctx.Logger()
	h.failing = &failing{names: map[string]bool{}}
	return nil
}

// logChanges logs a check when it starts or stops failing, with the error
// the probe's answer leaves out, once rather than on every probe.
func (h *Handler) logChanges(checks []Check) {
	f := h.failing
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range checks {
		switch {
		case !c.OK && !f.names[c.Name]:
			f.names[c.Name] = true
			h.logger.Warn("readiness check failing", zap.String("check", c.Name), zap.Bool("critical", c.Critical),
				zap.String("detail", c.Detail), zap.Error(c.Err))
		case c.OK && f.names[c.Name]:
			delete(f.names, c.Name)
			h.logger.Info("readiness check passing again", zap.String("check", c.Name))
		}
	}
}

// Validate refuses a readiness timeout that cannot pass.
func (h *Handler) Validate() error {
	if h.Timeout <= 0 {
		return fmt.Errorf("practicegw_health: timeout %s must be positive", time.Duration(h.Timeout))
	}
	return nil
}

// ServeHTTP answers the probes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	switch {
	case strings.HasSuffix(r.URL.Path, "/healthz"):
		return writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	case strings.HasSuffix(r.URL.Path, "/readyz"):
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(h.Timeout))
		defer cancel()
		checks := h.checker.Readiness(ctx)
		h.logChanges(checks)
		status, code := "ready", http.StatusOK
		for _, c := range checks {
			if c.Critical && !c.OK {
				status, code = "not_ready", http.StatusServiceUnavailable
			}
		}
		return writeJSON(w, code, map[string]any{"status": status, "checks": checks})
	}
	return next.ServeHTTP(w, r)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// parseCaddyfile sets up the handler. Syntax:
//
//	practicegw_health [{
//	    timeout <duration>
//	}]
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	return &handler, handler.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			v, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("timeout: %v", err)
			}
			h.Timeout = caddy.Duration(v)
		default:
			return d.Errf("unknown practicegw_health option %q", d.Val())
		}
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
