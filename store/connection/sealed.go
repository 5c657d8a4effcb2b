package connection

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/internal/sealed"
)

// StateDigest is what a store finds a consent by: the SHA-256 of its
// state, so that a copy of the store gives no state away.
func StateDigest(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// storedAuthorization is a consent as every backend keeps it: under its
// state's digest, the verifier sealed.
type storedAuthorization struct {
	Connection string    `json:"connection"`
	Firm       string    `json:"firm"`
	Attempt    int       `json:"attempt"`
	Verifier   string    `json:"sealed_verifier"`
	Expires    time.Time `json:"expires"`
}

// whatVerifier binds a sealed verifier to its consent's state: a record
// copied under another state's digest does not open there.
func whatVerifier(state string) string { return "connect-verifier:" + state }

// SealAuthorization is a as a store keeps it, its verifier sealed under
// key.
func SealAuthorization(key *sealed.Key, a Authorization) ([]byte, error) {
	v, err := json.Marshal(storedAuthorization{Connection: a.Connection, Firm: a.Firm, Attempt: a.Attempt, Expires: a.Expires,
		Verifier: string(key.Seal([]byte(a.Verifier), whatVerifier(a.State)))})
	if err != nil {
		return nil, fmt.Errorf("save authorization of connection %s: %w", a.Connection, err)
	}
	return v, nil
}

// OpenAuthorization reads the consent SealAuthorization made for state;
// ErrNotFound when it expired at now.
func OpenAuthorization(key *sealed.Key, state string, raw []byte, now time.Time) (Authorization, error) {
	var rec storedAuthorization
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Authorization{}, fmt.Errorf("take authorization: decode: %w", err)
	}
	if !now.Before(rec.Expires) {
		return Authorization{}, ErrNotFound
	}
	verifier, err := key.Open([]byte(rec.Verifier), whatVerifier(state))
	if err != nil {
		return Authorization{}, fmt.Errorf("authorization of connection %s: opening its verifier: %w", rec.Connection, err)
	}
	return Authorization{State: state, Connection: rec.Connection, Firm: rec.Firm, Attempt: rec.Attempt,
		Verifier: string(verifier), Expires: rec.Expires}, nil
}

// Expired reports whether the consent a store keeps as raw has expired at
// now (or cannot be read: nothing could take it).
func Expired(raw []byte, now time.Time) bool {
	var rec storedAuthorization
	return json.Unmarshal(raw, &rec) != nil || !now.Before(rec.Expires)
}
