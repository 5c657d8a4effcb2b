package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/internal/sealed"
)

// secretsKeyFile is where a gateway alone keeps the secrets key it
// generated, beside its database but not in it.
const secretsKeyFile = "secrets.key"

// configuredSecretsKey is the key secrets_key names (its default,
// PRACTICEGW_SECRETS_KEY's placeholder, is filled in from the
// environment's table), or nil when it names none. A secrets_key that is
// configured but expands to nothing (a missing file, an unset variable) is
// an error, not a reason to fall back.
func configuredSecretsKey(repl *caddy.Replacer, configured string) (*sealed.Key, error) {
	value := strings.TrimSpace(repl.ReplaceAll(configured, ""))
	if configured != "" && value == "" {
		return nil, fmt.Errorf("secrets_key %s expands to nothing", configured)
	}
	if value == "" {
		return nil, nil
	}
	k, err := sealed.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("secrets_key: %w", err)
	}
	return k, nil
}

// keyFile reads the secrets key kept in dir, generating it (mode 0600) the
// first time.
func keyFile(dir string) (key *sealed.Key, generated bool, err error) {
	path := filepath.Join(dir, secretsKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		k, err := sealed.Parse(string(b))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return k, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	// Written aside and linked into place, so that the file is never seen
	// half written and a key already there is never replaced.
	k, text := sealed.Random()
	tmp, err := os.CreateTemp(dir, secretsKeyFile+".*")
	if err != nil {
		return nil, false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text + "\n"); err != nil {
		tmp.Close()
		return nil, false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, false, err
	}
	if err := tmp.Close(); err != nil {
		return nil, false, err
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return keyFile(dir)
	} else if err != nil {
		return nil, false, err
	}
	return k, true, nil
}
