package apierror

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/idempotency"
)

// From is the one table from domain errors to the contract's status and
// code, which the API answers with and the console shows. ok is false for
// an error the table does not know: an internal failure, which the caller
// logs and answers with Internal.
func From(err error) (e *Error, ok bool) {
	var apiErr *Error
	var invalid *practice.InvalidError
	var refused *practice.StatusError
	var held *practice.HeldBackError
	switch {
	case err == nil:
		return nil, false
	case errors.As(err, &apiErr):
		return apiErr, true
	case errors.As(err, &invalid):
		status := http.StatusBadRequest
		if invalid.Code == "invalid_stage" {
			status = http.StatusUnprocessableEntity
		}
		e := New(status, invalid.Code, invalid.Message).WithParam(invalid.Param)
		e.MappedStages = invalid.Mapped
		return e, true
	case errors.Is(err, practice.ErrInvalidCursor):
		return InvalidCursor, true
	case errors.Is(err, practice.ErrNotFound):
		return New(http.StatusNotFound, "resource_not_found", "No such record."), true
	case errors.Is(err, practice.ErrTooManyEndpoints):
		return New(http.StatusConflict, "conflict",
			"This firm has as many webhook endpoints in this mode as it may have; delete one it no longer uses first."), true
	case errors.Is(err, practice.ErrEndpointDisabled):
		return New(http.StatusConflict, "conflict",
			"The webhook endpoint is disabled; enable it, then replay."), true
	case errors.As(err, &held):
		// A replay waits for the bounds every delivery keeps (the
		// endpoint's breaker and concurrency, the firm's in-flight
		// bound, bulk replays per minute): the caller may ask again then.
		status, code := http.StatusConflict, "conflict"
		if held.RateLimited {
			status, code = http.StatusTooManyRequests, "rate_limited"
		}
		return New(status, code, held.Reason).WithHeader("Retry-After", seconds(held.RetryAfter)), true
	case errors.Is(err, practice.ErrBusy), errors.Is(err, practice.ErrLeaseLost):
		return New(http.StatusConflict, "conflict",
			"An attempt on this delivery is in progress; try again when it has finished.").WithHeader("Retry-After", "1"), true
	case errors.Is(err, idempotency.ErrKeyReused):
		return New(http.StatusUnprocessableEntity, "idempotency_key_reused",
			"This Idempotency-Key was used with a different request; use a new key for a new request."), true
	case errors.Is(err, idempotency.ErrInProgress):
		return New(http.StatusConflict, "conflict",
			"A request with this Idempotency-Key is still in progress; retry once it has finished."), true
	case errors.Is(err, practice.ErrConflict):
		return New(http.StatusConflict, "conflict", "The record changed while this request was applied; fetch it and try again."), true
	case errors.Is(err, practice.ErrNeedsReconnect):
		return New(http.StatusServiceUnavailable, "connection_needs_reconnect",
			"The firm's connection to the system behind this route needs its administrator to reconnect it (console, Systems)."), true
	case errors.Is(err, practice.ErrReconnecting):
		return New(http.StatusConflict, "connection_needs_reconnect",
			"The firm's connection to the system behind this route waits for its administrator to reconnect it (console, Systems); reads answer from its copy meanwhile."), true
	case errors.Is(err, practice.ErrNotConnected):
		return New(http.StatusConflict, "system_not_connected",
			"The firm has no system connected behind this route; its administrator connects one (POST /v1/connections, console, Systems)."), true
	case errors.Is(err, practice.ErrUnavailable):
		retry, _ := practice.RetryAfter(err)
		return unavailable(retry, "The firm's system behind this route is unavailable; try again shortly."), true
	case errors.Is(err, practice.ErrBadUpstream):
		return New(http.StatusBadGateway, "upstream_unavailable",
			"The firm's system behind this route answered with something unreadable; try again shortly."), true
	case errors.As(err, &refused):
		// The firm's system refused a request the gateway made (its
		// credentials, a shape it no longer accepts): not the caller's
		// doing. The contract's codes are fixed and list no 502 code, so a
		// refusal answers as the system being unavailable, with the
		// vendor's Retry-After when it sent one; the gateway's log has the
		// vendor's answer.
		return unavailable(refused.RetryAfter,
			"The firm's system refused the gateway's request; try again later."), true
	}
	return nil, false
}

// unavailable is a 503 upstream_unavailable with Retry-After: retry, or
// 30 seconds when the upstream named no wait.
func unavailable(retry time.Duration, message string) *Error {
	if retry <= 0 {
		retry = 30 * time.Second
	}
	return New(http.StatusServiceUnavailable, "upstream_unavailable", message).
		WithHeader("Retry-After", seconds(retry))
}

// seconds is a Retry-After value: whole seconds, rounded up, at least one.
func seconds(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(max(d, time.Second).Seconds())))
}

// InvalidCursor answers a paging cursor that the API did not give out, or
// that the store behind it cannot read.
var InvalidCursor = New(http.StatusBadRequest, "invalid_cursor",
	"This cursor is not one this collection gave out for these filters; send next_cursor from the previous page with the same filters.").
	WithParam("cursor")

// Internal is the answer to an error the table does not know.
func Internal() *Error {
	return New(http.StatusInternalServerError, "internal_error",
		"Something went wrong on our side; the request id helps us find it.")
}
