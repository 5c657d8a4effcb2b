// Package auth authenticates /v1 requests by bearer credential. A
// credential is issued to one firm for one integration with the least
// scopes it needs; its token is a signed JWT checked without a network
// call, and the registry can revoke it on its own.
package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/internal/forwarded"
	"github.com/practicegw/practicegw/store/credential"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the practicegw_auth middleware. It has no options: the
// credential registry belongs to the practicegw app.
type Handler struct {
	registry *Registry
	logger   *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.practicegw_auth",
		New: func() caddy.Module { return new(Handler) },
	}
}

// RegistryProvider is what the practicegw app offers this handler.
type RegistryProvider interface {
	Credentials() *Registry
}

// Provision finds the credential registry of the practicegw app.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	app, err := ctx.App("practicegw")
	if err != nil {
		return fmt.Errorf("practicegw_auth needs the practicegw app: %w", err)
	}
	p, ok := app.(RegistryProvider)
	if !ok {
		return fmt.Errorf("practicegw app %T offers no credential registry", app)
	}
	h.registry = p.Credentials()
	return nil
}

var errUnauthenticated = apierror.New(http.StatusUnauthorized, "unauthenticated",
	"Send a valid credential as 'Authorization: Bearer <token>'.").
	WithHeader("WWW-Authenticate", `Bearer realm="practicegw"`)

var errStoreUnavailable = apierror.New(http.StatusServiceUnavailable, "upstream_unavailable",
	"Credentials cannot be checked right now; retry shortly.").WithHeader("Retry-After", "1")

// ServeHTTP authenticates the request and passes it on with its credential.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	apierror.RequestID(w)
	forwarded.SetHSTS(w, r)
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return apierror.Refuse(w, r, errUnauthenticated)
	}
	cred, err := h.registry.Authenticate(r.Context(), token)
	switch {
	case err == nil:
	case errors.Is(err, errBadToken) || errors.Is(err, credential.ErrNotFound):
		h.logger.Debug("refused credential", zap.Error(err))
		return apierror.Refuse(w, r, errUnauthenticated)
	default:
		// The credential store could not be asked: the caller is not at
		// fault and may retry.
		h.logger.Warn("credential lookup failed", zap.Error(err))
		apierror.Write(w, r, errStoreUnavailable)
		return nil
	}
	// The access log's user_id is the credential, so every call is
	// attributed without logging the token.
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.auth.user.id", cred.ID)
		repl.Set("practicegw.firm", cred.Firm)
	}
	return next.ServeHTTP(w, r.WithContext(WithCredential(r.Context(), cred)))
}

func bearer(header string) (string, bool) {
	const prefix = "Bearer "
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(header[len(prefix):]), true
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
