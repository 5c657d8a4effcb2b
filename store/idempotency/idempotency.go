// Package idempotency defines what the gateway remembers of a write sent
// with an Idempotency-Key, so that a retry replays the first answer.
package idempotency

import (
	"errors"
	"time"
)

// TTL is how long a key is remembered once its request is answered.
const TTL = 24 * time.Hour

// InFlight is how long a key stays reserved for a request that has not
// been answered. A request that outlives it died with its process, or its
// answer could not be recorded: the key is released, so that a retry runs
// instead of being told for a day that the first is still in progress. It
// is far longer than any write takes (upstream timeouts and retries
// included).
const InFlight = 2 * time.Minute

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
