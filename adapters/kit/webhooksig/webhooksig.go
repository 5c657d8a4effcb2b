// Package webhooksig checks the HMAC-SHA256 signatures vendors put on the
// webhooks they send (Xero, Karbon).
package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// hmacSHA256 is the HMAC-SHA256 of body under key.
func hmacSHA256(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return m.Sum(nil)
}

// ValidHMAC reports whether sig is the HMAC-SHA256 of body under key,
// written in hex (either case) or base64 (standard or URL alphabet, with or
// without padding): vendors differ and some do not say. The comparison
// takes constant time.
func ValidHMAC(key, body []byte, sig string) bool {
	sig = strings.TrimSpace(sig)
	if len(key) == 0 || sig == "" {
		return false
	}
	want := hmacSHA256(key, body)
	for _, dec := range []func(string) ([]byte, error){
		hex.DecodeString,
		base64.StdEncoding.DecodeString,
		base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString,
		base64.RawURLEncoding.DecodeString,
	} {
		if got, err := dec(sig); err == nil && len(got) == len(want) && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}
