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
)

// The errors of endpoints and deliveries that the API answers with
// (practice.ErrInvalidCursor, ErrBusy, ErrLeaseLost, ErrTooManyEndpoints,
// ErrEndpointDisabled and *practice.HeldBackError) are declared in practice,
// below the dispatcher, so that the contract's error table needs no import
// of it.
