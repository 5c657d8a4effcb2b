package ratelimit

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
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/caddyauth"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from the adapter's output")

// TestCaddyfileAdapt adapts each testdata/*.caddyfile and compares the JSON
// with the .json beside it; go test -run CaddyfileAdapt -update rewrites
// them after a deliberate change.
func TestCaddyfileAdapt(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.caddyfile")
	if len(files) == 0 {
		t.Fatal("no testdata/*.caddyfile")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			got := adapt(t, file)
			golden := strings.TrimSuffix(file, ".caddyfile") + ".json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("adapted %s differs from %s (run with -update after a deliberate change):\n%s", file, golden, got)
			}
		})
	}
}

func adapt(t *testing.T, file string) []byte {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": file})
	if err != nil {
		t.Fatalf("adapting %s: %v", file, err)
	}
	for _, w := range warnings {
		t.Errorf("warning: %s", w)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

func TestCaddyfileErrors(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{"burst 0", "burst"},
		{"burst many", "burst"},
		{"fallback maybe", "want local, allow or deny"},
		{"timeout soon", "timeout"},
		{"timeout -1s", "timeout"},
		{"batch_interval 0", "batch_interval"},
		{"batch_interval never", "batch_interval"},
		{"default 10/d", "unit"},
		{"default", "argument"},
		{"redis a b", "argument"},
		{"window 1h", "unknown setting"},
	} {
		src := ":8080 {\n\tpracticegw_ratelimit {\n\t\t" + tt.body + "\n\t}\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one mentioning %q", tt.body, err, tt.want)
		}
	}
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(":8080 {\n\tpracticegw_ratelimit 10/s 20/s\n}\n"), nil)
	if err == nil {
		t.Error("two positional rates accepted")
	}
}
