package dispatcher

import (
	"errors"

	"github.com/practicegw/practicegw/practice"
)

// Errors callers branch on. Everything else is an internal failure.
var (
	// ErrNotFound is practice.ErrNotFound, so that the API's one error table
	// answers 404 for a missing event, endpoint or delivery exactly as for a
	// missing record. A record of another firm is not found, never forbidden.
	ErrNotFound = practice.ErrNotFound

	// ErrInvalidChange marks a change that can never become events (an
	// unreadable record, a payload over MaxPayload). Retrying it cannot
	// help, so a consumer logs it and moves on instead of stalling on it.
	ErrInvalidChange = errors.New("change cannot be turned into events")

	// ErrInvalidCursor is a paging cursor this store did not issue.
	ErrInvalidCursor = errors.New("invalid cursor")

	// ErrBusy means an attempt on the delivery is in progress; try again
	// when it has finished.
	ErrBusy = errors.New("an attempt on this delivery is in progress")

	// ErrLeaseLost means the delivery was claimed by someone else after our
	// lease ran out; our attempt is not recorded.
	ErrLeaseLost = errors.New("delivery lease lost")

	// ErrTooManyEndpoints refuses a registration past the firm's
	// ceiling (Config.MaxEndpoints) in that mode.
	ErrTooManyEndpoints = errors.New("the firm has as many webhook endpoints as it may have")

	// ErrEndpointDisabled refuses a replay to a disabled endpoint: enable it
	// first.
	ErrEndpointDisabled = errors.New("the webhook endpoint is disabled")
)
