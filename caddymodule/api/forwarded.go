package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/cluster"
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
	// as its caller sent it, and its credential as this instance's
	// registry knows it now. A request it cannot verify, or whose
	// credential no longer stands, is an error (cluster's), logged there.
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
// caller's own, without writing a second access log line for it. The
// credential is the one this instance's registry knows now (the cluster
// refuses one revoked), so a route whose scope it no longer holds is
// refused as it would be at /v1.
func (h *Handler) serveForwarded(w http.ResponseWriter, r *http.Request) (string, error) {
	if h.peers == nil {
		return "none", apierror.New(http.StatusNotFound, "resource_not_found", "Unrecognized request URL ("+r.Method+" "+r.URL.Path+").")
	}
	in, cred, err := h.peers.Forwarded(r)
	if err != nil {
		return "none", forwardRefusal(err)
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	ctx := context.WithValue(auth.WithCredential(in.Context(), cred), forwardedKey{}, true)
	return h.serve(w, in.WithContext(ctx))
}

// forwardRefusal is the contract's answer to a forwarded request refused:
// 503 when what vouches for it cannot be asked now (the nonces' store,
// the revocations not read yet), the answer practicegw_auth gives a
// revoked credential for one, and 401 for the rest (unsigned, changed on
// the way, outside the window, replayed).
func forwardRefusal(err error) *apierror.Error {
	switch {
	case errors.Is(err, cluster.ErrNoNonces), errors.Is(err, auth.ErrNotSynced):
		return apierror.New(http.StatusServiceUnavailable, "upstream_unavailable",
			"This forwarded request cannot be checked right now; retry shortly.").WithHeader("Retry-After", "1")
	case errors.Is(err, cluster.ErrCredential):
		return apierror.New(http.StatusUnauthorized, "unauthenticated",
			"Send a valid credential as 'Authorization: Bearer <token>'.").WithHeader("WWW-Authenticate", `Bearer realm="practicegw"`)
	}
	return apierror.New(http.StatusUnauthorized, "unauthenticated",
		"Only another instance of this gateway forwards requests here, each once and at once.")
}
