package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/practicegw/practicegw/store/credential"
)

// Token prefixes let secret scanners and people tell live tokens from
// sandbox ones at a glance.
const (
	livePrefix    = "pgw_live_"
	sandboxPrefix = "pgw_test_"
	issuer        = "practicegw"
)

// Keyring signs with its first key and verifies with any of them.
type Keyring struct {
	keys []credential.SigningKey
}

// NewKeyring needs at least one key of at least 32 bytes.
func NewKeyring(keys ...credential.SigningKey) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no signing key")
	}
	for _, k := range keys {
		if k.ID == "" || len(k.Secret) < 32 {
			return nil, fmt.Errorf("signing key %q: needs an id and at least 32 bytes of secret", k.ID)
		}
	}
	return &Keyring{keys: keys}, nil
}

// claims are what a token says, and all that authorizing a request needs:
// the firm, scopes, sandbox and ceiling of the credential it names. Tokens
// issued before scopes were carried have none (Scopes nil).
type claims struct {
	Firm      string   `json:"firm"`
	Sandbox   bool     `json:"sbx,omitempty"`
	Scopes    []string `json:"scp,omitempty"`
	RateLimit string   `json:"rl,omitempty"`
	jwt.RegisteredClaims
}

// sign makes the bearer token for a credential.
func (k *Keyring) sign(c *credential.Credential) (string, error) {
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		Firm:      c.Firm,
		Sandbox:   c.Sandbox,
		Scopes:    c.Scopes,
		RateLimit: c.RateLimit,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:   issuer,
			Subject:  c.ID,
			IssuedAt: jwt.NewNumericDate(c.CreatedAt),
		},
	})
	tok.Header["kid"] = k.keys[0].ID
	s, err := tok.SignedString(k.keys[0].Secret)
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	if c.Sandbox {
		return sandboxPrefix + s, nil
	}
	return livePrefix + s, nil
}

// errBadToken is deliberately vague towards callers: the reason is logged,
// never returned in a response.
var errBadToken = errors.New("token is not valid")

// verify checks a token's signature with the algorithm pinned to HS256 and
// returns the credential id, firm and sandbox flag it names.
func (k *Keyring) verify(token string) (claims, error) {
	var sandbox bool
	switch {
	case strings.HasPrefix(token, livePrefix):
		token = token[len(livePrefix):]
	case strings.HasPrefix(token, sandboxPrefix):
		token, sandbox = token[len(sandboxPrefix):], true
	default:
		return claims{}, fmt.Errorf("%w: unknown prefix", errBadToken)
	}
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, k.key,
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(time.Minute),
		// One token, one spelling: base64 with unused bits set decodes
		// to the same signature under a lenient decoder.
		jwt.WithStrictDecoding(),
	)
	if err != nil {
		return claims{}, fmt.Errorf("%w: %v", errBadToken, err)
	}
	if c.Sandbox != sandbox || !strings.HasPrefix(c.Subject, "crd_") || c.Firm == "" {
		return claims{}, fmt.Errorf("%w: claims do not match the token kind", errBadToken)
	}
	if c.Scopes != nil && len(c.Scopes) == 0 {
		return claims{}, fmt.Errorf("%w: no scopes", errBadToken)
	}
	return c, nil
}

func (k *Keyring) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	for _, key := range k.keys {
		if key.ID == kid {
			return key.Secret, nil
		}
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}
