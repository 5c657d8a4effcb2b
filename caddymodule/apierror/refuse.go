package apierror

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Refuse answers a request that a middleware refuses (401, 403, 429).
// When the server has error routes (a Caddyfile's handle_errors), e goes to
// them as a caddyhttp.Error, as Caddy's own modules hand over theirs, so
// that the routes and the {http.error.*} placeholders see it; its headers
// (Retry-After, WWW-Authenticate) are set already, and practicegw_api in
// an error route writes the contract's body. Without error routes Caddy
// would answer with the status alone, so the body is written here, as the
// contract promises.
func Refuse(w http.ResponseWriter, r *http.Request, e *Error) error {
	if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv.Errors != nil && len(srv.Errors.Routes) > 0 {
		RequestID(w)
		for k, v := range e.Header {
			w.Header()[k] = v
		}
		return caddyhttp.Error(e.Status, e)
	}
	Write(w, r, e)
	return nil
}

// Handling returns the error an error route is handling, as the
// contract's error, and whether the request is in an error route at all.
// An error that is not practicegw's (a file server's 404, say) keeps its
// status with the contract's code for it.
func Handling(r *http.Request) (*Error, bool) {
	err, ok := r.Context().Value(caddyhttp.ErrorCtxKey).(error)
	if !ok || err == nil {
		return nil, false
	}
	if e, known := From(err); known {
		return e, true
	}
	var he caddyhttp.HandlerError
	if errors.As(err, &he) {
		switch he.StatusCode {
		case http.StatusNotFound:
			return New(he.StatusCode, "resource_not_found", "Nothing is served at this URL."), true
		case http.StatusMethodNotAllowed:
			return New(he.StatusCode, "method_not_allowed", "This method is not allowed here."), true
		case http.StatusRequestEntityTooLarge:
			return New(he.StatusCode, "payload_too_large", "The request body is too large."), true
		}
	}
	return Internal(), true
}
