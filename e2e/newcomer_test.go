package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A gateway just started says, in one line, where its API, console and
// admin endpoint are, where it keeps state and how to issue a first
// credential, without Caddy's warnings that a plain-HTTP site serves
// neither HTTP/2 nor HTTP/3 or its line that it autosaved the
// configuration (persist_config off); a command pointed at no gateway says which
// address it tried and how to point it elsewhere.
func TestStartSaysWhereThingsAre(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	var start map[string]any
	for _, line := range strings.Split(g.logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		if l["msg"] == "practicegw is serving" {
			if start != nil {
				t.Fatalf("two start lines:\n%s", g.logs.String())
			}
			start = l
		}
		if l["level"] == "warn" && strings.Contains(l["msg"].(string), "requires TLS") {
			t.Errorf("a warning at start: %s", line)
		}
		if strings.Contains(l["msg"].(string), "autosaved config") {
			t.Errorf("the Caddyfile was copied to an autosave file: %s", line)
		}
	}
	if start == nil {
		t.Fatalf("no start line in:\n%s", g.logs.String())
	}
	dataDir, _ := filepath.Abs(g.dataDir)
	want := map[string]string{
		"api":              "http://" + g.addr + "/v1",
		"console":          "http://" + g.addr + "/console",
		"admin":            g.admin,
		"state":            dataDir,
		"first_credential": "practicegw credential issue --firm frm_acme --name first --scopes admin,clients:read,jobs:read --admin " + g.admin,
	}
	for k, v := range want {
		if start[k] != v {
			t.Errorf("the start line's %s is %v, want %s", k, start[k], v)
		}
	}
	// The command the line gives works as given.
	args := strings.Fields(want["first_credential"])[1:]
	if out, err := exec.Command(binary, args...).CombinedOutput(); err != nil || !strings.Contains(string(out), "pgw_live_") {
		t.Errorf("%s: %v\n%s", want["first_credential"], err, out)
	}

	gone := freePort(t)
	out, err := exec.Command(binary, "credential", "list", "--firm", "frm_acme", "--admin", gone).CombinedOutput()
	if err == nil {
		t.Fatal("credential list against no gateway succeeded")
	}
	msg := string(out)
	for _, w := range []string{"no gateway answers at " + gone, "--admin", "PRACTICEGW_ADMIN", "practicegw run"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q does not say %q", msg, w)
		}
	}
	if strings.Contains(msg, "dial tcp") || strings.Contains(msg, "connection refused") {
		t.Errorf("%q speaks of the dialer", msg)
	}
}
