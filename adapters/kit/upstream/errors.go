package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// UnavailableError says an upstream cannot serve now: it is down, timing
// out, rate-limiting us, refusing our credentials, or its breaker is open.
// RetryAfter is how long to wait before trying again, zero when unknown.
// It matches practice.ErrUnavailable under errors.Is.
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

func (e *UnavailableError) Is(target error) bool { return target == practice.ErrUnavailable }
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

// StatusError is an answer outside 2xx that the client passes on rather
// than retrying away. A 404 matches practice.ErrNotFound and a 409
// practice.ErrConflict; adapters turn a 400 on a write into an
// *practice.InvalidError from Body.
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
	case practice.ErrNotFound:
		return e.Status == http.StatusNotFound || e.Status == http.StatusGone
	case practice.ErrConflict:
		return e.Status == http.StatusConflict || e.Status == http.StatusPreconditionFailed
	}
	return false
}

// MalformedError is an upstream answer we could not read: not JSON, not
// the shape the vendor publishes, or missing what it promises. It matches
// practice.ErrBadUpstream.
type MalformedError struct {
	Upstream string
	What     string
	Err      error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("%s: unreadable %s: %v", e.Upstream, e.What, e.Err)
}

func (e *MalformedError) Is(target error) bool { return target == practice.ErrBadUpstream }
func (e *MalformedError) Unwrap() error        { return e.Err }

// Malformed builds a MalformedError.
func Malformed(upstream, what string, err error) error {
	return &MalformedError{Upstream: upstream, What: what, Err: err}
}
