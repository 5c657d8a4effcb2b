package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// At start the gateway logs one line that says where the API, the console
// and the admin endpoint are, where state is kept and how to issue a first
// credential, read from the running configuration.
func TestStartLineSaysWhereThingsAre(t *testing.T) {
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	api, admin := free(), free()
	_, apiPort, _ := net.SplitHostPort(api)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log.json")
	cfg := fmt.Sprintf(`{
		"admin": {"listen": %q, "config": {"persist": false}},
		"logging": {"logs": {"default": {"writer": {"output": "file", "filename": %q}, "encoder": {"format": "json"}}}},
		"apps": {
			"http": {"servers": {"api": {"listen": [":%s"], "automatic_https": {"disable": true}}}},
			"practicegw": {"data_dir": %q, "firms": [{"id": "frm_hollis"}]}
		}
	}`, admin, logFile, apiPort, filepath.Join(dir, "data"))
	if err := caddy.Load([]byte(cfg), true); err != nil {
		t.Fatal(err)
	}
	defer caddy.Stop()
	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] == "practicegw is serving" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d start lines, want one", len(lines))
	}
	l := lines[0]
	want := map[string]any{
		"level":            "info",
		"api":              "http://localhost:" + apiPort + "/v1",
		"console":          "http://localhost:" + apiPort + "/console",
		"admin":            admin,
		"state":            filepath.Join(dir, "data"),
		"first_credential": "practicegw credential issue --firm frm_hollis --name first --scopes admin,clients:read,jobs:read --admin " + admin,
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("%s = %v, want %v", k, l[k], v)
		}
	}
	if s := fmt.Sprint(l); strings.Contains(s, "redis://") {
		t.Errorf("the start line names a Redis URL: %s", s)
	}
}
