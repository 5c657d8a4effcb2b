package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/internal/envconfig"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestCaddyfileAdapt adapts Caddyfiles with every practicegw directive
// through the real binary and compares the JSON with golden files.
func TestCaddyfileAdapt(t *testing.T) {
	// Every variable of the environment's table empty but these, so that
	// the goldens hold the Caddyfiles and the defaults, whatever the
	// machine has set.
	env := os.Environ()
	for _, v := range envconfig.Vars {
		env = append(env, v.Name+"=")
	}
	env = append(env, "PRACTICEGW_ADMIN=localhost:2019", "PRACTICEGW_DATA=/var/lib/practicegw", "PRACTICEGW_LISTEN=:8080")
	for _, c := range []struct{ caddyfile, golden string }{
		{"../Caddyfile", "testdata/default.json"},
		{"testdata/directives.Caddyfile", "testdata/directives.json"},
		{"../config/karbon-xero-sharepoint.Caddyfile", "testdata/karbon-xero-sharepoint.json"},
		{"../deploy/Caddyfile.production", "testdata/production.json"},
	} {
		cmd := exec.Command(binary, "adapt", "--config", c.caddyfile, "--adapter", "caddyfile")
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("adapt %s: %v: %s", c.caddyfile, err, errOut.String())
		}
		if strings.Contains(errOut.String(), "WARN") {
			t.Errorf("adapt %s warns: %s", c.caddyfile, errOut.String())
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, out.Bytes(), "", "\t"); err != nil {
			t.Fatal(err)
		}
		pretty.WriteByte('\n')
		if *update {
			if err := os.WriteFile(c.golden, pretty.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(c.golden)
		if err != nil {
			t.Fatalf("%v (run go test ./e2e -run TestCaddyfileAdapt -update)", err)
		}
		if !bytes.Equal(want, pretty.Bytes()) {
			t.Errorf("%s adapts to\n%s\nwant (%s)\n%s", c.caddyfile, pretty.String(), c.golden, want)
		}
	}
}

func TestDeprecatedRouteHeaders(t *testing.T) {
	g := startGateway(t, gatewayOptions{config: "testdata/directives.Caddyfile",
		env: []string{"PRACTICEGW_SIGNING_KEY=" + secretsKey(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}})
	tok := g.issue("frm_acme", false, "jobs:read", "jobs:write").Token
	job := g.do(t, "GET", "/v1/jobs?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	r := g.do(t, "POST", "/v1/jobs/"+job+"/stage", tok, map[string]any{"stage": "in_review"})
	if r.StatusCode != 200 {
		t.Fatalf("move: %d %s", r.StatusCode, r.body)
	}
	if r.Header.Get("Deprecation") != "@1780272000" || r.Header.Get("Sunset") != "Tue, 01 Jun 2027 00:00:00 GMT" ||
		!strings.Contains(r.Header.Get("Link"), `rel="deprecation"`) {
		t.Errorf("headers: Deprecation %q Sunset %q Link %q", r.Header.Get("Deprecation"), r.Header.Get("Sunset"), r.Header.Get("Link"))
	}
	if r := g.do(t, "GET", "/v1/jobs/"+job, tok, nil); r.Header.Get("Deprecation") != "" {
		t.Error("a route not marked deprecated answers with Deprecation")
	}
	var doc map[string]any
	json.Unmarshal(g.do(t, "GET", "/v1/openapi.json", "", nil).body, &doc)
	op := doc["paths"].(map[string]any)["/v1/jobs/{id}/stage"].(map[string]any)["post"].(map[string]any)
	if op["deprecated"] != true {
		t.Error("the OpenAPI document does not mark the route deprecated")
	}
	// A smaller body cap applies where configured.
	big := map[string]any{"stage": "in_review", "note": strings.Repeat("x", 70000)}
	if r := g.do(t, "POST", "/v1/jobs/"+job+"/stage", tok, big); r.StatusCode != 413 {
		t.Errorf("body over max_body_bytes: %d", r.StatusCode)
	}
}
