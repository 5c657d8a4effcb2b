package practice

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The errors of webhook endpoints and deliveries that callers branch on.
// They are declared here, below the dispatcher, so that the contract's one
// error table (caddymodule/apierror) depends on error values alone.
var (
	// ErrInvalidCursor is a paging cursor this store did not issue.
	ErrInvalidCursor = errors.New("invalid cursor")

	// ErrBusy means an attempt on the delivery is in progress; try again
	// when it has finished.
	ErrBusy = errors.New("an attempt on this delivery is in progress")

	// ErrLeaseLost means the delivery was claimed by someone else after our
	// lease ran out; our attempt is not recorded.
	ErrLeaseLost = errors.New("delivery lease lost")

	// ErrTooManyEndpoints refuses a registration past the firm's
	// ceiling (the dispatcher's Config.MaxEndpoints) in that mode.
	ErrTooManyEndpoints = errors.New("the firm has as many webhook endpoints as it may have")

	// ErrEndpointDisabled refuses a replay to a disabled endpoint: enable it
	// first.
	ErrEndpointDisabled = errors.New("the webhook endpoint is disabled")
)

// HeldBackError refuses a replay that would pass a bound protecting a
// receiver or the other firms: the endpoint's circuit breaker is open, the
// endpoint or the firm has as many requests in flight as it may, or the
// firm has asked for as many bulk replays this minute as it may.
type HeldBackError struct {
	// Reason is one human sentence saying which bound and what to do.
	Reason string
	// RetryAfter is when asking again may succeed.
	RetryAfter time.Duration
	// RateLimited is true of the bulk replays' per-minute bound.
	RateLimited bool
}

func (e *HeldBackError) Error() string { return "replay held back: " + e.Reason }

// UnavailableError says an upstream cannot serve now: it is down, timing
// out, rate-limiting us, refusing our credentials, or its breaker is open.
// RetryAfter is how long to wait before trying again, zero when unknown.
// It matches ErrUnavailable under errors.Is.
type UnavailableError struct {
	Upstream   string
	RetryAfter time.Duration
	Err        error
}

func (e *UnavailableError) Error() string {
	msg := e.Upstream + " unavailable"
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter.Round(time.Millisecond))
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
func (e *UnavailableError) Unwrap() error        { return e.Err }

// RetryAfter returns how long err asks the caller to wait, and whether it
// is an UnavailableError at all. The API uses it for its Retry-After
// header.
func RetryAfter(err error) (time.Duration, bool) {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.RetryAfter, true
	}
	return 0, false
}

// StatusError is an answer outside 2xx from a firm's system that the
// upstream client passes on rather than retrying away. A 404 matches ErrNotFound and a 409
// ErrConflict; adapters turn a 400 on a write into an
// *InvalidError from Body.
type StatusError struct {
	Upstream string
	Method   string
	Path     string
	Status   int
	// Body is the start of the answer, for messages and logs.
	Body []byte
	// RetryAfter is the vendor's Retry-After, zero when it sent none.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s %s: %d %s: %.200s", e.Upstream, e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Body)
}

func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.Status == http.StatusGone
	case ErrConflict:
		return e.Status == http.StatusConflict || e.Status == http.StatusPreconditionFailed
	}
	return false
}

// UnusableError says that what a vendor answered for one record cannot be
// used: a part of it the vendor does not have (a paid invoice's payment
// answering 404), a detail read that answers a record it cannot be, a row
// that cannot be read. It is that record's alone: a listing goes on
// without it (Page.Unusable), it is served as last known, and the sync
// asks for it again on its own schedule. It is a bad upstream answer (a
// 502 for a read of it) and never a not-found, even when the part that
// failed answered 404: the record is there, and nothing removes it for
// that.
type UnusableError struct {
	Kind Kind
	// ID is the record's /v1 id.
	ID string
	// What is the part that could not be used, in the gateway's words
	// ("its payment", "its detail"), for the sync's status.
	What string
	// Err is the vendor's answer as an error, for the log.
	Err error
}

func (e *UnusableError) Error() string {
	return fmt.Sprintf("%s %s: %s cannot be used: %v", e.Kind.Singular(), e.ID, e.What, e.Err)
}

// Is makes it a bad upstream answer, and nothing else: not the not-found
// of a part.
func (e *UnusableError) Is(target error) bool { return target == ErrBadUpstream }

// Reason is why the record is unusable in a few plain words, never the
// vendor's: for the sync's status.
func (e *UnusableError) Reason() string {
	var st *StatusError
	switch {
	case errors.As(e.Err, &st):
		return fmt.Sprintf("%s answers %d for %s", st.Upstream, st.Status, e.What)
	case errors.Is(e.Err, ErrNotFound):
		return "the vendor does not have " + e.What
	}
	return "the vendor's answer for " + e.What + " cannot be read"
}

// Unusable is err as the unusable answer for record id of kind k (what
// names the part that failed) when it is the record's alone: the vendor
// answered not found for a part of it, a refusal of this request alone
// (a 4xx but for the grant's, a timeout's and the rate limit's), or an
// answer that cannot be read. Any other error (the vendor unavailable, a
// grant refused, the caller gone) is the listing's, and is returned as it
// is.
func Unusable(k Kind, id, what string, err error) error {
	var st *StatusError
	var un *UnusableError
	switch {
	case err == nil, errors.As(err, &un), errors.Is(err, ErrUnavailable), errors.Is(err, ErrNeedsReconnect):
		return err
	case errors.Is(err, ErrBadUpstream), errors.Is(err, ErrNotFound):
	case errors.As(err, &st) && st.Status >= 400 && st.Status < 500 &&
		st.Status != http.StatusUnauthorized && st.Status != http.StatusForbidden &&
		st.Status != http.StatusRequestTimeout && st.Status != http.StatusTooManyRequests:
	default:
		return err
	}
	return &UnusableError{Kind: k, ID: id, What: what, Err: err}
}
