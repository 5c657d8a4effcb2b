// Package idempotency defines what the gateway remembers of a write sent
// with an Idempotency-Key, so that a retry replays the first answer, and
// how every store keeps it: the answer sealed.
package idempotency

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/internal/sealed"
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

// stored is a Record as every backend keeps it: the answer sealed, for an
// answer may hold what is given once (a webhook endpoint's secret) and a
// copy of the store must not give it away. Body is an earlier version's
// answer, kept in plain text, read as it is until its key expires.
type stored struct {
	Fingerprint string    `json:"fingerprint"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body,omitempty"`
	SealedBody  []byte    `json:"sealed_body,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// whatBody binds a sealed answer to its key: an answer copied under
// another key does not open there.
func whatBody(key string) string { return "idempotency:" + key }

// Seal is r as a store keeps it under key, its answer sealed under k.
func Seal(k *sealed.Key, key string, r Record) ([]byte, error) {
	s := stored{Fingerprint: r.Fingerprint, Status: r.Status, CreatedAt: r.CreatedAt}
	if len(r.Body) > 0 {
		s.SealedBody = k.Seal(r.Body, whatBody(key))
	}
	v, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("idempotency key: encode: %w", err)
	}
	return v, nil
}

// Open reads the record Seal made of key.
func Open(k *sealed.Key, key string, raw []byte) (Record, error) {
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		return Record{}, fmt.Errorf("idempotency key: decode: %w", err)
	}
	r := Record{Fingerprint: s.Fingerprint, Status: s.Status, Body: s.Body, CreatedAt: s.CreatedAt}
	if len(s.SealedBody) > 0 {
		body, err := k.Open(s.SealedBody, whatBody(key))
		if err != nil {
			return Record{}, fmt.Errorf("idempotency key: opening its answer: %w", err)
		}
		r.Body = body
	}
	return r, nil
}
