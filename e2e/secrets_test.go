package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/redistest"
)

// secretsKey is a fresh key: base64 of 32 random bytes.
func secretsKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// refusesToStart runs practicegw with args and env, which must make it
// exit with an error whose output says want.
func refusesToStart(t *testing.T, env []string, want string, args ...string) {
	t.Helper()
	p := startProcess(t, env, args...)
	if !p.wait(30 * time.Second) {
		p.kill()
		t.Errorf("practicegw %s is still running, want a refusal saying %q:\n%s", args[0], want, tail(p.out.String(), 2000))
		return
	}
	if p.err == nil || !strings.Contains(p.out.String(), want) {
		t.Errorf("practicegw %s: exit %v, want a refusal saying %q:\n%s", args[0], p.err, want, tail(p.out.String(), 2000))
	}
}

// exampleValue is NAME's value in one of the repository's env examples.
func exampleValue(t *testing.T, file, name string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), name+"="); ok {
			return v
		}
	}
	t.Fatalf("%s sets no %s", file, name)
	return ""
}

// gatewayEnv is what a gateway of these tests runs with, plus env.
func gatewayEnv(t *testing.T, env ...string) []string {
	return append(append(os.Environ(), "PRACTICEGW_LISTEN="+freePort(t), "PRACTICEGW_ADMIN="+freePort(t),
		"PRACTICEGW_DATA="+t.TempDir(), "PRACTICEGW_REDIS=", "PRACTICEGW_KAFKA=", "PRACTICEGW_SECRETS_KEY="), env...)
}

// A gateway alone with no secrets key configured generates one in its own
// file beside the database, says so, and keeps sealing under it: an
// endpoint's secret is not in the database file and still signs after a
// restart.
func TestSecretsSealedUnderAGeneratedKey(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	keyFile := filepath.Join(g.dataDir, "secrets.key")
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	const generated = "no secrets key configured: generated"
	warned := false
	for line := range strings.Lines(g.logs.String()) {
		warned = warned || strings.Contains(line, `"level":"warn"`) && strings.Contains(line, generated) && strings.Contains(line, keyFile)
	}
	if !warned {
		t.Errorf("no warning naming %s in the log:\n%s", keyFile, tail(g.logs.String(), 3000))
	}

	tok := g.issue("frm_acme", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "job.stage_changed")
	rc.setSecrets(secret)
	db, err := os.ReadFile(filepath.Join(g.dataDir, "practicegw.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, []byte(strings.TrimPrefix(secret, "whsec_"))) {
		t.Error("the endpoint's secret is in the database file in plain text")
	}

	g.restart()
	if strings.Contains(g.logs.String(), generated) {
		t.Errorf("a restart warns again:\n%s", tail(g.logs.String(), 3000))
	}
	job := g.do(t, "GET", "/v1/jobs?stage=in_progress&limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)
	g.do(t, "POST", "/v1/jobs/"+job["id"].(string)+"/stage", tok, map[string]any{"stage": "in_review"})
	rc.wait(1, 10*time.Second) // the receiver fails the test if the signature does not verify
}

// The examples' placeholders, and any key published in the repository,
// stop the gateway at start.
func TestSecretsPublishedKeysAreRefused(t *testing.T) {
	config := []string{"run", "--config", "testdata/directives.Caddyfile", "--adapter", "caddyfile"}
	example := "../deploy/secrets.env.example"
	refusesToStart(t, gatewayEnv(t, "PRACTICEGW_SECRETS_KEY="+secretsKey(),
		"PRACTICEGW_SIGNING_KEY="+exampleValue(t, example, "PRACTICEGW_SIGNING_KEY")), "not base64", config...)
	// What the compose example held until it was refused.
	refusesToStart(t, gatewayEnv(t, "PRACTICEGW_SECRETS_KEY="+secretsKey(),
		"PRACTICEGW_SIGNING_KEY=Y29tcG9zZS1kZW1vLXNpZ25pbmcta2V5Om5vdC1zZWNyZXQ6bmV2ZXItdXNlLWluLXByb2R1Y3Rpb24="),
		"published in practicegw's repository (deploy/secrets.env.example)", config...)
	refusesToStart(t, gatewayEnv(t, "PRACTICEGW_SIGNING_KEY="+secretsKey(),
		"PRACTICEGW_SECRETS_KEY="+exampleValue(t, example, "PRACTICEGW_SECRETS_KEY")), "secrets_key", config...)
}

// Instances sharing Redis need one configured secrets key: without it a
// gateway and a dispatcher refuse to start, and a gateway with another key
// than the one the secrets in Redis were sealed under refuses too.
func TestSecretsScaleOutNeedsOneKey(t *testing.T) {
	redis := redistest.Start(t)
	run := []string{"run", "--config", "../Caddyfile", "--adapter", "caddyfile"}
	refusesToStart(t, gatewayEnv(t, "PRACTICEGW_REDIS="+redis.URL()), "configure secrets_key", run...)
	refusesToStart(t, gatewayEnv(t, "PRACTICEGW_REDIS="+redis.URL(), "PRACTICEGW_KAFKA=127.0.0.1:1"),
		"PRACTICEGW_SECRETS_KEY", "dispatcher")

	startGateway(t, gatewayOptions{env: []string{"PRACTICEGW_REDIS=" + redis.URL(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}})
	refusesToStart(t, gatewayEnv(t, "PRACTICEGW_REDIS="+redis.URL(), "PRACTICEGW_SECRETS_KEY="+secretsKey()),
		"sealed under another secrets key", run...)
}
