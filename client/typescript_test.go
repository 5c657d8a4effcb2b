package client_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/internal/testgateway"
)

// TestTypeScriptClientExamples builds the TypeScript client and its
// examples strictly (tsc, typescript/tsconfig.json) and runs them against
// the test gateway, comparing what they print with
// typescript/examples/output.txt: a page walk to the end, an idempotent
// create, typed errors, a tombstone, the rate-limit headers and a webhook
// delivery verified by the client's helper.
func TestTypeScriptClientExamples(t *testing.T) {
	tsc := typescriptTool(t, "tsc")
	runTool(t, tsc, "--project", "tsconfig.json")
	limited, err := gateway.Issue(testgateway.Credential{Firm: "frm_acme", Sandbox: true, RateLimit: "1/m", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	node := exec.Command("node", filepath.Join("dist", "examples", "run.js"))
	node.Dir = "typescript"
	node.Env = append(os.Environ(), "PRACTICEGW_URL="+gatewayURL, "PRACTICEGW_SANDBOX_TOKEN="+sandboxToken,
		"PRACTICEGW_LIVE_TOKEN="+liveToken, "PRACTICEGW_LIMITED_TOKEN="+limited)
	var stderr bytes.Buffer
	node.Stderr = &stderr
	out, err := node.Output()
	if err != nil {
		t.Fatalf("the examples failed: %v\n%s%s", err, out, stderr.Bytes())
	}
	want, err := os.ReadFile(filepath.Join("typescript", "examples", "output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Errorf("the examples printed:\n%s\nwant (examples/output.txt):\n%s", out, want)
	}
}

// typescriptTool is a command of the TypeScript client's npm packages,
// which scripts/install-test-deps.sh installs with npm ci. Missing, it
// skips the test, or fails it in CI.
func typescriptTool(t *testing.T, name string) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("typescript", "node_modules", ".bin", name))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		msg := fmt.Sprintf("%s is not installed (%v); run scripts/install-test-deps.sh, which installs it with npm ci in client/typescript", name, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// runTool runs a tool in typescript/, failing the test with what it
// printed when it fails.
func runTool(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = "typescript"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
}
