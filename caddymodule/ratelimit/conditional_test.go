package ratelimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/store/credential"
)

// answering is a next handler that answers status with a body, as
// practicegw_api answers a read.
func answering(status int) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Etag", `"v1"`)
		w.WriteHeader(status)
		if status == http.StatusOK {
			w.Write([]byte(`{"data":[]}`))
		}
		return nil
	})
}

func serveConditional(t *testing.T, h *Handler, cred *credential.Credential, next caddyhttp.Handler) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/v1/clients", nil)
	r.Header.Set("If-None-Match", `"v1"`)
	r = r.WithContext(auth.WithCredential(r.Context(), cred))
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	return w
}

// A conditional read answered 304 costs nothing and still tells the
// remaining quota; one answered 200 is booked like any request; once the
// quota is spent, a conditional read is refused before it is served.
func TestNotModifiedIsFree(t *testing.T) {
	inProcess(t)
	h, _ := provision(t, &Handler{Default: "3/h"})
	cred := &credential.Credential{ID: "crd_poll", Firm: "frm_acme"}

	for i := range 10 {
		w := serveConditional(t, h, cred, answering(http.StatusNotModified))
		if w.Code != http.StatusNotModified {
			t.Fatalf("conditional read %d: %d, want 304", i+1, w.Code)
		}
		if got := w.Header().Get("RateLimit"); got != `"default";r=3;t=0` {
			t.Fatalf("conditional read %d: RateLimit %q, want the whole quota left", i+1, got)
		}
	}
	w := serveConditional(t, h, cred, answering(http.StatusOK))
	if w.Code != http.StatusOK || w.Body.String() != `{"data":[]}` {
		t.Fatalf("a changed page: %d %q", w.Code, w.Body)
	}
	if got := w.Header().Get("RateLimit"); got != `"default";r=2;t=1200` {
		t.Fatalf("a changed page: RateLimit %q, want it booked", got)
	}
	serve(t, h, cred)
	serve(t, h, cred)
	w = serveConditional(t, h, cred, answering(http.StatusNotModified))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a conditional read with no quota left: %d, want 429 with Retry-After", w.Code)
	}
}

// When the quota runs out between the look and the answer, a changed page
// becomes the 429 it would have been, with the contract's body and none of
// the page.
func TestConditionalReadRefusedAtAnswer(t *testing.T) {
	inProcess(t)
	h, _ := provision(t, &Handler{Default: "1/h"})
	cred := &credential.Credential{ID: "crd_race", Firm: "frm_acme"}
	spend := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		serve(t, h, cred) // another request of the credential takes the last one
		return answering(http.StatusOK).ServeHTTP(w, r)
	})
	w := serveConditional(t, h, cred, spend)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", w.Code)
	}
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code != "rate_limited" {
		t.Fatalf("body %q, want the contract's rate_limited error only", w.Body)
	}
	if w.Header().Get("Etag") != "" {
		t.Fatal("the refused page's ETag leaked into the 429")
	}
}
