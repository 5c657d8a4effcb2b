package connection

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/internal/sealed"
)

// StateDigest is what a store finds a consent by: the SHA-256 of its
// state, so that a copy of the store gives no state away. It is the
// digest stores keep of a start token and of a browser's value too.
func StateDigest(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// storedAuthorization is a consent as every backend keeps it: under its
// state's digest, the verifier sealed, and once started the digest of
// the browser that started it. store/redis's scripts read and write
// "browser" by that name.
type storedAuthorization struct {
	Connection string    `json:"connection"`
	Firm       string    `json:"firm"`
	Attempt    int       `json:"attempt"`
	Verifier   string    `json:"sealed_verifier"`
	Expires    time.Time `json:"expires"`
	Browser    string    `json:"browser,omitempty"`
}

// storedStart is a consent's start link as every backend keeps it: under
// its token's digest, the consent's state sealed (bound to the token), so
// that a copy of the store gives neither away.
type storedStart struct {
	State   string    `json:"sealed_state"`
	Expires time.Time `json:"expires"`
}

func whatStart(token string) string { return "connect-start:" + token }

// SealStart is a's start link as a store keeps it, under the digest of
// a.Start.
func SealStart(key *sealed.Key, a Authorization) ([]byte, error) {
	if a.Start == "" {
		return nil, fmt.Errorf("save authorization of connection %s: no start token", a.Connection)
	}
	v, err := json.Marshal(storedStart{State: string(key.Seal([]byte(a.OAuthState), whatStart(a.Start))), Expires: a.Expires})
	if err != nil {
		return nil, fmt.Errorf("save the start of connection %s: %w", a.Connection, err)
	}
	return v, nil
}

// OpenStart is the state of the consent SealStart kept for token;
// ErrNotFound when it expired at now.
func OpenStart(key *sealed.Key, token string, raw []byte, now time.Time) (string, error) {
	var rec storedStart
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "", fmt.Errorf("start a consent: decode: %w", err)
	}
	if !now.Before(rec.Expires) {
		return "", ErrNotFound
	}
	state, err := key.Open([]byte(rec.State), whatStart(token))
	if err != nil {
		return "", fmt.Errorf("start a consent: opening its state: %w", err)
	}
	return string(state), nil
}

// BindAuthorization is the consent a store keeps as raw, bound to the
// browser whose value is browser; ErrNotFound when it expired at now or
// is bound already (a consent is started once).
func BindAuthorization(raw []byte, browser string, now time.Time) ([]byte, error) {
	var rec storedAuthorization
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("start a consent: decode: %w", err)
	}
	if !now.Before(rec.Expires) || rec.Browser != "" {
		return nil, ErrNotFound
	}
	rec.Browser = StateDigest(browser)
	return json.Marshal(rec)
}

// BoundTo reports whether the consent a store keeps as raw was started by
// the browser whose value is browser. A consent never started, or a
// browser with no value, is bound to nothing.
func BoundTo(raw []byte, browser string) bool {
	var rec storedAuthorization
	return browser != "" && json.Unmarshal(raw, &rec) == nil && rec.Browser != "" &&
		subtle.ConstantTimeCompare([]byte(rec.Browser), []byte(StateDigest(browser))) == 1
}

// whatVerifier binds a sealed verifier to its consent's state: a record
// copied under another state's digest does not open there.
func whatVerifier(state string) string { return "connect-verifier:" + state }

// SealAuthorization is a as a store keeps it, its verifier sealed under
// key.
func SealAuthorization(key *sealed.Key, a Authorization) ([]byte, error) {
	v, err := json.Marshal(storedAuthorization{Connection: a.Connection, Firm: a.Firm, Attempt: a.Attempt, Expires: a.Expires,
		Verifier: string(key.Seal([]byte(a.Verifier), whatVerifier(a.OAuthState)))})
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
	return Authorization{OAuthState: state, Connection: rec.Connection, Firm: rec.Firm, Attempt: rec.Attempt,
		Verifier: string(verifier), Expires: rec.Expires}, nil
}

// Expired reports whether the consent a store keeps as raw has expired at
// now (or cannot be read: nothing could take it).
func Expired(raw []byte, now time.Time) bool {
	var rec storedAuthorization
	return json.Unmarshal(raw, &rec) != nil || !now.Before(rec.Expires)
}
