// Package idempotency defines what the gateway remembers of a write sent
// with an Idempotency-Key, so that a retry replays the first answer.
package idempotency

import (
	"errors"
	"time"
)

// TTL is how long a key is remembered.
const TTL = 24 * time.Hour

// Record is the state of one key. A record with Status 0 is a write still
// in progress.
type Record struct {
	// Fingerprint identifies the request (method, path and body) so that
	// reusing a key for a different request can be refused.
	Fingerprint string    `json:"fingerprint"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// Done reports whether the first request has been answered.
func (r *Record) Done() bool { return r.Status != 0 }

// Errors a write with a key is refused with; the API's error table answers
// them.
var (
	// ErrKeyReused is a key sent again with a different request.
	ErrKeyReused = errors.New("idempotency key reused for a different request")
	// ErrInProgress is a key whose first request has not been answered.
	ErrInProgress = errors.New("idempotency key in use by a request in progress")
)
