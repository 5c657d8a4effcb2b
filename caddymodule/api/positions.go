package api

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
)

// positions seals event feed positions into the ids an event stream
// sends. A position is encrypted, not only signed like a paging cursor:
// a store's position counts the firm's own events (or, on an earlier
// version, everyone's), which is nobody else's business, so a client sees
// an opaque id that only a gateway holding the key every instance shares
// can read. Each is sealed to its tenant, so one firm's id (or a sandbox
// id on a live stream) does not open for another.
type positions struct{ key *sealed.Key }

// newPositions derives the positions' key from the paging cursors' key,
// which every instance shares; the derivation keeps the two apart.
func newPositions(cursorKey []byte) (positions, error) {
	k, err := hkdf.Key(sha256.New, cursorKey, nil, "practicegw event stream positions v1", sealed.KeySize)
	if err != nil {
		return positions{}, fmt.Errorf("event stream positions key: %w", err)
	}
	key, err := sealed.New(k)
	if err != nil {
		return positions{}, fmt.Errorf("event stream positions key: %w", err)
	}
	return positions{key: key}, nil
}

func (p positions) seal(t practice.Tenant, pos string) string {
	return string(p.key.Seal([]byte(pos), positionScope(t)))
}

// open returns the position an id stands for, or an error for anything
// this gateway did not seal for this tenant: an earlier version's ids
// (MAC'd, not sealed), another tenant's, or an edited one.
func (p positions) open(t practice.Tenant, id string) (string, error) {
	pos, err := p.key.Open([]byte(id), positionScope(t))
	if err != nil {
		return "", err
	}
	return string(pos), nil
}

func positionScope(t practice.Tenant) string { return "event-position:" + t.String() }
