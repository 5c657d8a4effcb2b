package apierror_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/idempotency"
)

// Every domain error that can reach an answer has the contract's status
// and code, however deeply it is wrapped; only what the table does not
// know is an internal error.
func TestOneTable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("replay dlv_1: %w", err) }
	for _, tt := range []struct {
		err    error
		status int
		code   string
		header string
	}{
		{practice.Invalid("limit", "too big"), 400, "parameter_invalid", ""},
		{&practice.InvalidError{Code: "invalid_stage", Param: "stage", Message: "no"}, 422, "invalid_stage", ""},
		{wrap(practice.ErrInvalidCursor), 400, "invalid_cursor", ""},
		{wrap(dispatcher.ErrNotFound), 404, "resource_not_found", ""},
		{wrap(practice.ErrNotFound), 404, "resource_not_found", ""},
		{wrap(practice.ErrEndpointDisabled), 409, "conflict", ""},
		{wrap(practice.ErrBusy), 409, "conflict", "Retry-After"},
		{wrap(practice.ErrLeaseLost), 409, "conflict", "Retry-After"},
		{wrap(&practice.HeldBackError{Reason: "The endpoint's breaker is open.", RetryAfter: 40 * time.Second}), 409, "conflict", "Retry-After"},
		{wrap(&practice.HeldBackError{Reason: "Too many bulk replays.", RetryAfter: 6 * time.Second, RateLimited: true}), 429, "rate_limited", "Retry-After"},
		{wrap(practice.ErrTooManyEndpoints), 409, "conflict", ""},
		{idempotency.ErrKeyReused, 422, "idempotency_key_reused", ""},
		{idempotency.ErrInProgress, 409, "conflict", ""},
		{wrap(practice.ErrConflict), 409, "conflict", ""},
		{wrap(&practice.UnavailableError{Upstream: "karbon", RetryAfter: 1500 * time.Millisecond}), 503, "upstream_unavailable", "Retry-After"},
		{wrap(upstream.Malformed("xero", "invoice page", errors.New("EOF"))), 502, "upstream_unavailable", ""},
		{wrap(&practice.StatusError{Upstream: "karbon", Method: "GET", Path: "/v3/WorkItems", Status: http.StatusForbidden}), 503, "upstream_unavailable", "Retry-After"},
		{wrap(&practice.StatusError{Upstream: "karbon", Method: "GET", Path: "/v3/WorkItems/x", Status: http.StatusNotFound}), 404, "resource_not_found", ""},
		{wrap(apierror.New(413, "payload_too_large", "big")), 413, "payload_too_large", ""},
	} {
		e, ok := apierror.From(tt.err)
		if !ok {
			t.Errorf("%v: not in the table", tt.err)
			continue
		}
		if e.Status != tt.status || e.Code != tt.code {
			t.Errorf("%v: %d %s, want %d %s", tt.err, e.Status, e.Code, tt.status, tt.code)
		}
		if tt.header != "" {
			if e.Header.Get(tt.header) == "" {
				t.Errorf("%v: no %s header", tt.err, tt.header)
			}
		}
	}
	if _, ok := apierror.From(errors.New("disk on fire")); ok {
		t.Error("an unknown error was given a status of its own")
	}
	if got := apierror.Internal(); got.Status != 500 || got.Code != "internal_error" {
		t.Errorf("Internal() = %d %s", got.Status, got.Code)
	}
}
