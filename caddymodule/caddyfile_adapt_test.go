// Package caddymodule holds, beside the modules' packages, the golden
// Caddyfile adapt cases of every practicegw directive and option, kept
// the way Caddy keeps its own in caddytest/integration/caddyfile_adapt:
// one case a file in caddyfile_adapt/, the Caddyfile, a line of ten
// dashes, then either the JSON it adapts to or a part of the error it
// must be refused with.
package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/practicegw/practicegw/adapters/dropbox"
	_ "github.com/practicegw/practicegw/adapters/google_drive"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	_ "github.com/practicegw/practicegw/adapters/sharepoint"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/adapters/xpm"
	_ "github.com/practicegw/practicegw/caddymodule/api"
	_ "github.com/practicegw/practicegw/caddymodule/auth"
	_ "github.com/practicegw/practicegw/caddymodule/console"
	_ "github.com/practicegw/practicegw/caddymodule/gateway"
	_ "github.com/practicegw/practicegw/caddymodule/health"
	_ "github.com/practicegw/practicegw/caddymodule/ingest"
	_ "github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/internal/envconfig"
)

var update = flag.Bool("update", false, "rewrite the expected JSON of caddyfile_adapt/*.caddyfiletest from the adapter's output")

// separator splits a case into its Caddyfile and what it adapts to.
const separator = "----------"

// TestCaddyfileAdaptToJSON adapts every caddyfile_adapt/*.caddyfiletest.
// A case whose second part is JSON must adapt to exactly that; any other
// must fail with an error containing it. go test ./caddymodule -run
// CaddyfileAdapt -update rewrites the JSON after a deliberate change.
func TestCaddyfileAdaptToJSON(t *testing.T) {
	// Every variable of the environment's table empty, so that a case
	// adapts to its Caddyfile and the defaults, whatever the machine has set.
	for _, v := range envconfig.Vars {
		t.Setenv(v.Name, "")
	}
	files, err := filepath.Glob("caddyfile_adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no caddyfile_adapt/*.caddyfiletest (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			caddyfile, expected, ok := strings.Cut(string(data), separator)
			if !ok {
				t.Fatalf("%s has no %s line between the Caddyfile and what it adapts to", file, separator)
			}
			caddyfile, expected = strings.TrimSpace(caddyfile)+"\n", strings.TrimSpace(expected)
			if strings.HasPrefix(expected, "{") {
				compareJSON(t, file, caddyfile, expected)
				return
			}
			if _, _, err := adapt(caddyfile); err == nil || !strings.Contains(err.Error(), expected) {
				t.Errorf("error %v, want one containing %q", err, expected)
			}
		})
	}
}

// compareJSON adapts caddyfile and compares the indented JSON with
// expected, or writes it in its place with -update.
func compareJSON(t *testing.T, file, caddyfile, expected string) {
	t.Helper()
	out, warnings, err := adapt(caddyfile)
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("warning: line %d: %s", w.Line, w.Message)
	}
	var got bytes.Buffer
	if err := json.Indent(&got, out, "", "\t"); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(file, []byte(caddyfile+separator+"\n"+got.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got.String() != expected {
		t.Errorf("adapts to\n%s\nwant\n%s\n(run with -update after a deliberate change)", got.String(), expected)
	}
}

func adapt(caddyfile string) ([]byte, []caddyconfig.Warning, error) {
	return caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
}
