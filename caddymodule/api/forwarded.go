package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

// With a bound on the memory read models take, each firm's records are
// held by a few instances, and a request for a firm this instance does
// not hold is answered by one that does (the cluster's placement). It is
// sent on after this instance authenticated it, charged it to the
// caller's rate limit and logged it, to forwardedPrefix on the holder's
// internal listener, which answers it with the credential its registry
// knows and counts it nowhere again. The public site never serves the
// prefix (it is no route of its: a 404), so nothing a client sends there
// can pass for another instance.

// forwardedPrefix is where a holder's internal listener receives the
// requests other instances forward.
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

// Forwarded is the API as an instance's internal listener serves it: the
// requests other instances forward (at forwardedPrefix) and nothing else,
// which it answers 404. It is a practicegw_api of its own, provisioned in
// ctx (the app's, when it starts its internal listener), outside every
// site: no access log line, rate limit or credential check of the
// caller's is made again for a request already charged and logged where
// its caller sent it.
func Forwarded(ctx caddy.Context) (http.Handler, error) {
	mod, err := ctx.LoadModuleByID("http.handlers.practicegw_api", nil)
	if err != nil {
		return nil, err
	}
	h := mod.(*Handler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apierror.RequestID(w)
		_ = h.answer(w, r, h.serveForwarded)
	}), nil
}

// serveForwarded answers a request another instance forwarded, as the
// caller's own. The credential is the one this instance's registry knows
// now (the cluster refuses one revoked), so a route whose scope it no
// longer holds is refused as it would be at /v1.
func (h *Handler) serveForwarded(w http.ResponseWriter, r *http.Request) (string, error) {
	if h.peers == nil || !strings.HasPrefix(r.URL.Path, forwardedPrefix) {
		return "none", apierror.New(http.StatusNotFound, "resource_not_found", "Unrecognized request URL ("+r.Method+" "+r.URL.Path+").")
	}
	in, cred, err := h.peers.Forwarded(r)
	if err != nil {
		return "none", forwardRefusal(err)
	}
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
