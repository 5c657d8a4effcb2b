package upstream

import (
	"fmt"

	"github.com/practicegw/practicegw/practice"
)

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
