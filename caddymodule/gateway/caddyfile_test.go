package gateway_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/practicegw/practicegw/adapters/dropbox"
	_ "github.com/practicegw/practicegw/adapters/gdrive"
	_ "github.com/practicegw/practicegw/adapters/graph"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/caddymodule/gateway"
)

var update = flag.Bool("update", false, "rewrite golden files")

// adapt runs Caddy's own Caddyfile adapter in process.
func adapt(t *testing.T, caddyfile string) ([]byte, error) {
	t.Helper()
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	for _, w := range warnings {
		t.Errorf("warning: %s", w.Message)
	}
	return out, err
}

// The practicegw global option, every firm system and its Caddyfile forms,
// adapted to the app's JSON and compared with a golden file.
func TestAdaptSystems(t *testing.T) {
	src, err := os.ReadFile("testdata/systems.caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	out, err := adapt(t, string(src))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps map[string]json.RawMessage `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, cfg.Apps["practicegw"], "", "\t"); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	const golden = "testdata/systems.json"
	if *update {
		if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./caddymodule/gateway -run TestAdaptSystems -update)", err)
	}
	if !bytes.Equal(want, pretty.Bytes()) {
		t.Errorf("adapts to\n%s\nwant (%s)\n%s", pretty.String(), golden, want)
	}
}

// Mistakes in a firm's block are adapt-time errors that name the line.
func TestAdaptSystemErrors(t *testing.T) {
	for _, tt := range []struct{ block, want string }{
		{"records salesforce {\n}", `records "salesforce" is not a system practicegw has an adapter for`},
		{"ledger karbon {\n}", `ledger "karbon" is not a system practicegw has an adapter for`},
		{"records demo {\nbearer x\n}", "records demo takes no options"},
		{"records demo extra", "wrong argument count"},
		{"records karbon {\nbearer\nshoe_size 9\n}", `unknown option "shoe_size"`},
		{"records karbon {\nstage_map Lodged\n}", "stage_map takes two arguments"},
		{"documents sharepoint {\nkind tax_return\n}", "kind takes one or more phrases and a document kind"},
		{"records karbon {\nupstream {\nrate_limit lots\n}\n}", `rate_limit "lots" must look like 120/m`},
		{"records", "wrong argument count"},
	} {
		caddyfile := "{\n\tpracticegw {\n\t\tfirm frm_x {\n" + tt.block + "\n\t\t}\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
		_, err := adapt(t, caddyfile)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one containing %q", tt.block, err, tt.want)
		}
	}
}
