package apierror

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

var refusal = New(http.StatusUnauthorized, "unauthenticated", "Send a valid credential.").
	WithHeader("WWW-Authenticate", `Bearer realm="practicegw"`)

func TestRefuseWritesTheBodyWhenNoErrorRouteWould(t *testing.T) {
	srv := &caddyhttp.Server{} // no handle_errors
	r := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.ServerCtxKey, srv))
	w := httptest.NewRecorder()
	if err := Refuse(w, r, refusal); err != nil {
		t.Fatalf("returned %v, want the answer written and nil", err)
	}
	want := httptest.NewRecorder()
	want.Header().Set("Request-Id", w.Header().Get("Request-Id"))
	Write(want, r, refusal)
	if w.Code != 401 || w.Body.String() != want.Body.String() {
		t.Fatalf("got %d %q, want %d %q", w.Code, w.Body, want.Code, want.Body)
	}
	for _, h := range []string{"Content-Type", "Content-Length", "WWW-Authenticate", "Request-Id"} {
		if w.Header().Get(h) == "" || w.Header().Get(h) != want.Header().Get(h) {
			t.Errorf("%s: %q, want %q", h, w.Header().Get(h), want.Header().Get(h))
		}
	}
}

func TestRefuseHandsTheRefusalToHandleErrors(t *testing.T) {
	srv := &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}
	r := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.ServerCtxKey, srv))
	w := httptest.NewRecorder()
	err := Refuse(w, r, refusal)
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) || he.StatusCode != 401 {
		t.Fatalf("returned %#v, want a caddyhttp.HandlerError with status 401", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != "unauthenticated" {
		t.Fatalf("the handler error does not carry the refusal: %v", err)
	}
	if w.Body.Len() != 0 || w.Header().Get("WWW-Authenticate") == "" || w.Header().Get("Request-Id") == "" {
		t.Fatalf("wrote %q with headers %v; want headers only, the error route answers", w.Body, w.Header())
	}
}
