package auth

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
)

// A token has one spelling: the same signature bytes written with other
// unused trailing bits (which lenient base64 decoders ignore), or with
// padding, are refused, so a token cannot be varied to slip past a
// deny-list or a cache keyed on its text.
func TestNonCanonicalSignatureRefused(t *testing.T) {
	r, _ := newTestRegistry(t, key("k1", 'a'))
	ctx := context.Background()
	_, token, err := r.Issue(ctx, IssueRequest{Firm: "frm_acme", Name: "x", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Authenticate(ctx, token); err != nil {
		t.Fatalf("canonical token refused: %v", err)
	}
	dot := strings.LastIndexByte(token, '.')
	sig := token[dot+1:]
	want, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	// An HS256 signature is 32 bytes: 43 characters whose last carries
	// two bits of signature and four unused ones.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	variant := sig[:len(sig)-1] + string(alphabet[last^1])
	if got, err := base64.RawURLEncoding.DecodeString(variant); err != nil || string(got) != string(want) {
		t.Fatalf("variant does not decode to the same signature leniently: %v", err)
	}
	for name, tok := range map[string]string{
		"trailing bits": token[:dot+1] + variant,
		"padding":       token + "=",
	} {
		if _, err := r.Authenticate(ctx, tok); err == nil {
			t.Errorf("%s: a second spelling of the token was accepted", name)
		}
	}
}
