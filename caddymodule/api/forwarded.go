package api

import (
	"context"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

// With a bound on the memory read models take, each firm's records are
// held by a few instances, and a request for a firm this instance does
// not hold is answered by one that does (the app's placement). It is sent
// on after this instance authenticated it, charged it to the caller's rate
// limit and logged it, to forwardedPrefix on the holder, which answers it
// with the credential this instance signed and counts it nowhere again.

// forwardedPrefix is where a holder receives requests other instances
// forward; served by practicegw_api wherever it is mounted outside /v1
// (the root Caddyfile's catch-all), behind no authentication or limit of
// the caller's own.
const forwardedPrefix = "/_practicegw/forwarded/"

// peers is the app's placement, as the API sees it.
type peers interface {
	// Forward answers the request through an instance that holds the
	// firm's records of kind k, when this one does not; false when this
	// instance is to answer it.
	Forward(w http.ResponseWriter, r *http.Request, cred *credential.Credential, k practice.Kind) bool
	// Forwarded reads a request another instance forwarded: the request
	// as its caller sent it, and the credential that instance
	// authenticated. A request it cannot verify is an error.
	Forwarded(r *http.Request) (*http.Request, *credential.Credential, error)
}

type forwardedKey struct{}

// fromPeer reports whether r reached this instance from another, which
// already charged and logged it: it is answered here, never sent on again.
func fromPeer(r *http.Request) bool {
	v, _ := r.Context().Value(forwardedKey{}).(bool)
	return v
}

// serveForwarded answers a request another instance forwarded, as the
// caller's own, without writing a second access log line for it.
func (h *Handler) serveForwarded(w http.ResponseWriter, r *http.Request) (string, error) {
	if h.peers == nil {
		return "none", apierror.New(http.StatusNotFound, "resource_not_found", "Unrecognized request URL ("+r.Method+" "+r.URL.Path+").")
	}
	in, cred, err := h.peers.Forwarded(r)
	if err != nil {
		h.logger.Warn("forwarded request refused", zap.Error(err))
		return "none", apierror.New(http.StatusUnauthorized, "unauthenticated", "Only another instance of this gateway forwards requests here.")
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	ctx := context.WithValue(auth.WithCredential(in.Context(), cred), forwardedKey{}, true)
	return h.serve(w, in.WithContext(ctx))
}
