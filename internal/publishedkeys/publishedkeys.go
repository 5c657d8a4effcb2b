// Package publishedkeys refuses key material that practicegw's own
// repository has published: the placeholders in deploy/, the examples in
// config/ and the README, and test keys. A gateway started with one of
// them would sign credentials, or seal secrets, under a key anyone can
// read, so it does not start.
//
// The list holds SHA-256 fingerprints of the decoded key bytes, not the
// keys, and where each was published. A test scans the repository's
// examples and fails on any key-looking value missing from it.
package publishedkeys

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// published maps the SHA-256 of a key's bytes to where it was published.
var published = map[string]string{
	// The signing key the compose example shipped, which decodes to a
	// sentence saying it is not secret.
	"bc9bf12e72453964179fe54902a425878434c73cbd9d4efd2faa4b8e1f7c9529": "deploy/secrets.env.example",
	// The Kubernetes Secret's placeholder, should it be used undecoded.
	"896bf05df5782b2277fcb8877e767b3be9d766ea72be1ec2c8444bb7d123c535": "deploy/kubernetes/secret.example.yaml",
	// The signing key the end-to-end tests' Caddyfile named.
	"3a953d3aa4283233db2f7d45e9f036c975cf4f1ab55c24003cc1fa4faa7cfbdc": "e2e/testdata/directives.Caddyfile",
}

// Check refuses key, the decoded bytes of a configured key, if it was
// published.
func Check(key []byte) error {
	sum := sha256.Sum256(key)
	if where, ok := published[hex.EncodeToString(sum[:])]; ok {
		return fmt.Errorf("the key is published in practicegw's repository (%s), so anyone can use it: "+
			"generate your own with openssl rand -base64 32", where)
	}
	return nil
}
