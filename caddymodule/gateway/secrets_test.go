package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
)

// The compose example's signing key, published in the repository.
const composeSigningKey = "Y29tcG9zZS1kZW1vLXNpZ25pbmcta2V5Om5vdC1zZWNyZXQ6bmV2ZXItdXNlLWluLXByb2R1Y3Rpb24="

func TestConfiguredSecretsKey(t *testing.T) {
	repl := caddy.NewReplacer()
	_, text := sealed.Random()
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want, _ := sealed.Parse(text)

	t.Setenv("PRACTICEGW_SECRETS_KEY", "")
	if k, err := configuredSecretsKey(repl, ""); k != nil || err != nil {
		t.Fatalf("nothing configured: %v, %v", k, err)
	}
	if k, err := configuredSecretsKey(repl, "{file."+file+"}"); err != nil || k.ID() != want.ID() {
		t.Fatalf("from a file: %v, %v", k, err)
	}
	t.Setenv("PRACTICEGW_SECRETS_KEY", text)
	fromEnv := &App{}
	if err := applyEnvironment(fromEnv, os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	if fromEnv.SecretsKey != "{env.PRACTICEGW_SECRETS_KEY}" {
		t.Errorf("secrets_key from the environment is %q, want its placeholder", fromEnv.SecretsKey)
	}
	if k, err := configuredSecretsKey(repl, fromEnv.SecretsKey); err != nil || k.ID() != want.ID() {
		t.Fatalf("from PRACTICEGW_SECRETS_KEY: %v, %v", k, err)
	}
	for value, wantErr := range map[string]string{
		// Configured but empty is a mistake, never a fall back to
		// generating a key.
		"{file." + filepath.Join(t.TempDir(), "absent") + "}":  "expands to nothing",
		"{env.PRACTICEGW_TEST_UNSET}":                          "expands to nothing",
		"REPLACE_ME_WITH_OPENSSL_RAND_BASE64_32":               "base64",
		base64.StdEncoding.EncodeToString([]byte("too short")): "32 bytes",
		composeSigningKey: "published",
	} {
		if _, err := configuredSecretsKey(repl, value); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("secrets_key %s: %v, want an error saying %q", value, err, wantErr)
		}
	}
}

// A signing key published in the repository stops the gateway at start.
func TestKeyringRefusesPublishedKeys(t *testing.T) {
	repl := caddy.NewReplacer()
	t.Setenv("PRACTICEGW_SIGNING_KEY", composeSigningKey)
	keys := []SigningKeyConfig{{ID: "primary", Secret: "{env.PRACTICEGW_SIGNING_KEY}"}}
	_, _, err := keyring(context.Background(), repl, keys, nil)
	if err == nil || !strings.Contains(err.Error(), "deploy/secrets.env.example") {
		t.Fatalf("keyring with the compose placeholder: %v", err)
	}
	_, text := sealed.Random()
	t.Setenv("PRACTICEGW_SIGNING_KEY", text)
	if _, _, err := keyring(context.Background(), repl, keys, nil); err != nil {
		t.Fatalf("keyring with a fresh key: %v", err)
	}
}

// Alone and unconfigured, the gateway generates its secrets key in a file
// of its own beside the database, keeps using it, and refuses to start
// with a new one if the file is lost.
func TestGeneratedSecretsKey(t *testing.T) {
	dir := t.TempDir()
	sh, err := openShared(dir, []string{"frm_acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sh.generated || sh.keyFile != filepath.Join(dir, "secrets.key") {
		t.Fatalf("generated %v in %q", sh.generated, sh.keyFile)
	}
	if fi, err := os.Stat(sh.keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	ctx := context.Background()
	ep := dispatcher.Endpoint{ID: "we_1", Firm: "frm_acme", Status: dispatcher.EndpointEnabled,
		Secrets: []dispatcher.Secret{{Key: "whsec_a2VwdC1hY3Jvc3MtcmVzdGFydHMtb2YtdGhlLWdhdGV3YXk="}}}
	if err := sh.store.CreateEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	sh.Destruct()

	sh, err = openShared(dir, []string{"frm_acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sh.generated {
		t.Error("a second start generated another key")
	}
	if got, err := sh.store.Endpoint(ctx, "we_1"); err != nil || got.Secrets[0].Key != ep.Secrets[0].Key {
		t.Fatalf("after a restart: %+v, %v", got.Secrets, err)
	}
	sh.Destruct()

	if err := os.Remove(filepath.Join(dir, "secrets.key")); err != nil {
		t.Fatal(err)
	}
	_, err = openShared(dir, []string{"frm_acme"}, nil)
	if !errors.Is(err, sealed.ErrWrongKey) || !strings.Contains(err.Error(), "secrets.key was missing") {
		t.Fatalf("with the key file lost: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "secrets.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key that cannot open the store was left in its place: %v", err)
	}

	other, _ := sealed.Random()
	_, err = openShared(dir, []string{"frm_acme"}, other)
	if !errors.Is(err, sealed.ErrWrongKey) {
		t.Fatalf("with another configured key: %v", err)
	}
}
