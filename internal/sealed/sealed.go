// Package sealed encrypts the secrets practicegw keeps in its stores (the
// generated credential signing key, webhook endpoint secrets) under a key
// from configuration, so that a copy of the bbolt file or of Redis alone
// does not give them away.
//
// A sealed value is text: "pgws1:<key id>:<base64url of nonce|ciphertext>".
// The cipher is AES-256-GCM with a random nonce per value; the key id
// names the key that sealed it (derived from the key, so it reveals
// nothing), which is what lets a wrong key be told apart from damaged data
// and leaves room to rotate keys later. Each value is sealed with what it
// is ("signing-key", an endpoint's id) as associated data, so that a value
// moved to another place in the store does not open there.
package sealed

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/practicegw/practicegw/internal/publishedkeys"
)

// KeySize is the length of a secrets key: 32 bytes, as
// `openssl rand -base64 32` makes.
const KeySize = 32

const (
	prefix = "pgws1:"
	idSize = 8 // bytes of key id, 16 hex digits
)

var (
	// ErrWrongKey means the value was sealed under another key.
	ErrWrongKey = errors.New("sealed under another secrets key")
	// ErrDamaged means the value is not one this package sealed, or was
	// changed since, or belongs elsewhere (its associated data differs).
	ErrDamaged = errors.New("sealed value is damaged or out of place")
)

// Key seals and opens values. It is safe for concurrent use.
type Key struct {
	id   string
	aead cipher.AEAD
	// root derives the keys of other purposes (Derive), apart from the
	// cipher key and the id.
	root []byte
}

// New makes a Key from KeySize bytes of key material.
func New(key []byte) (*Key, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("a secrets key is %d bytes, not %d", KeySize, len(key))
	}
	// The cipher key and the key id are derived separately, so the id
	// says nothing about the cipher key.
	encKey, err := hkdf.Key(sha256.New, key, nil, "practicegw sealed v1 aes-256-gcm", 32)
	if err != nil {
		return nil, err
	}
	id, err := hkdf.Key(sha256.New, key, nil, "practicegw sealed v1 key id", idSize)
	if err != nil {
		return nil, err
	}
	root, err := hkdf.Key(sha256.New, key, nil, "practicegw sealed v1 derive", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(encKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, err
	}
	return &Key{id: hex.EncodeToString(id), aead: aead, root: root}, nil
}

// Parse reads a configured key: standard base64 of KeySize bytes, and
// not a key the repository publishes.
func Parse(text string) (*Key, error) {
	raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(text))
	if err != nil {
		return nil, fmt.Errorf("a secrets key is base64 of %d random bytes (openssl rand -base64 %d): %w", KeySize, KeySize, err)
	}
	if err := publishedkeys.Check(raw); err != nil {
		return nil, err
	}
	return New(raw)
}

// Random is a Key of fresh random bytes, with its material in base64 to
// keep; for a key file and for tests.
func Random() (*Key, string) {
	raw := make([]byte, KeySize)
	rand.Read(raw)
	k, err := New(raw)
	if err != nil {
		panic(err) // unreachable: raw is KeySize bytes
	}
	return k, base64.StdEncoding.EncodeToString(raw)
}

// ID names the key in sealed values and in errors.
func (k *Key) ID() string { return k.id }

// Derive is a 32-byte key for purpose, the same wherever this key is
// configured and telling nothing of it or of another purpose's: what
// every instance sharing the secrets key signs its messages to the others
// with.
func (k *Key) Derive(purpose string) []byte {
	b, err := hkdf.Key(sha256.New, k.root, nil, "practicegw "+purpose, 32)
	if err != nil {
		panic(err) // unreachable: 32 bytes of SHA-256 HKDF
	}
	return b
}

// Seal encrypts plaintext bound to what it is (what), which Open must be
// given again.
func (k *Key) Seal(plaintext []byte, what string) []byte {
	ct := k.aead.Seal(nil, nil, plaintext, []byte(what))
	out := make([]byte, 0, len(prefix)+len(k.id)+1+base64.RawURLEncoding.EncodedLen(len(ct)))
	out = append(out, prefix...)
	out = append(out, k.id...)
	out = append(out, ':')
	return base64.RawURLEncoding.AppendEncode(out, ct)
}

// Open decrypts a value Seal made with this key for the same what. It
// never returns a plaintext it did not authenticate: a value sealed under
// another key is ErrWrongKey (naming both keys), anything else that does
// not open is ErrDamaged.
func (k *Key) Open(value []byte, what string) ([]byte, error) {
	id, body, ok := split(value)
	if !ok {
		return nil, ErrDamaged
	}
	if id != k.id {
		return nil, fmt.Errorf("%w: %s, not this key %s", ErrWrongKey, id, k.id)
	}
	ct, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil {
		return nil, ErrDamaged
	}
	pt, err := k.aead.Open(nil, nil, ct, []byte(what))
	if err != nil {
		return nil, ErrDamaged
	}
	return pt, nil
}

// IsSealed reports whether value has the form of a sealed value, to tell
// it from the plain text an earlier version stored.
func IsSealed(value []byte) bool {
	return bytes.HasPrefix(value, []byte(prefix))
}

func split(value []byte) (id, body string, ok bool) {
	rest, found := bytes.CutPrefix(value, []byte(prefix))
	if !found {
		return "", "", false
	}
	i := bytes.IndexByte(rest, ':')
	if i != 2*idSize {
		return "", "", false
	}
	return string(rest[:i]), string(rest[i+1:]), true
}
