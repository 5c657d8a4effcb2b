// Package credential is what the stores keep of an integration's access:
// the credential, the keys that sign its tokens and the stores' errors
// about them. It sits below the Caddy modules so that a store keeping
// credentials imports no Caddy module; the interfaces that read and write
// them are declared by their consumer, caddymodule/auth.
package credential

import (
	"errors"
	"slices"
	"time"
)

// Credential is one integration's access to one firm's records. Its token
// is never stored: the token is a signed JWT naming the credential, and the
// registry only needs to know whether the credential still stands.
type Credential struct {
	ID      string   `json:"id"`
	Firm    string   `json:"firm"`
	Name    string   `json:"name"`
	Scopes  []string `json:"scopes"`
	Sandbox bool     `json:"sandbox"`
	// RateLimit is the credential's own ceiling ("N/s", "N/m" or "N/h");
	// empty means the gateway's default.
	RateLimit  string     `json:"rate_limit,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// staleAfter is how long a credential may go unused before it is flagged.
const staleAfter = 90 * 24 * time.Hour

// Stale reports whether the credential has gone unused for staleAfter.
func (c *Credential) Stale(now time.Time) bool {
	last := c.CreatedAt
	if c.LastUsedAt != nil {
		last = *c.LastUsedAt
	}
	return now.Sub(last) >= staleAfter
}

// Allows reports whether the credential carries scope. The admin scope
// grants nothing beyond console and credential management.
func (c *Credential) Allows(scope string) bool { return slices.Contains(c.Scopes, scope) }

// SigningKey is one HMAC key with the id that tokens name in their kid
// header, so that keys can be rotated without invalidating tokens in use.
type SigningKey struct {
	ID     string `json:"id"`
	Secret []byte `json:"-"`
}

// ErrNotFound is returned for an unknown credential id.
var ErrNotFound = errors.New("credential not found")

// ErrFeedGap is a revocation feed's answer for a position it has dropped.
var ErrFeedGap = errors.New("revocation feed no longer holds the position")
