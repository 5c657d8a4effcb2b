package gateway_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/practicegw/practicegw/adapters/dropbox"
	_ "github.com/practicegw/practicegw/adapters/google_drive"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	_ "github.com/practicegw/practicegw/adapters/sharepoint"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/adapters/xpm"
	_ "github.com/practicegw/practicegw/caddymodule/gateway"
	"github.com/practicegw/practicegw/internal/envconfig"
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
	unsetEnvironment(t)
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

// The kafka line takes a block for topics, the group, TLS and SASL.
func TestAdaptKafkaBlock(t *testing.T) {
	out, err := adapt(t, `{
	practicegw {
		kafka b1:9093,b2:9093 {
			changes_topic firm.changes
			group gw
			tls
			tls_ca /etc/kafka/ca.pem
			sasl SCRAM-SHA-512 practicegw {file./run/secrets/kafka}
		}
		firm frm_x
	}
}
:8080 {
	respond ok
}
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kafka":"b1:9093,b2:9093"`, `"kafka_changes_topic":"firm.changes"`, `"kafka_group":"gw"`,
		`"kafka_security":{"tls":true,"tls_ca":"/etc/kafka/ca.pem","sasl_mechanism":"SCRAM-SHA-512","sasl_username":"practicegw","sasl_password":"{file./run/secrets/kafka}"}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("adapted JSON lacks %s: %s", want, out)
		}
	}
	for block, want := range map[string]string{
		"kafka b:9093 {\nsasl PLAIN user\n}":  "kafka sasl takes a mechanism, a username and a password",
		"kafka b:9093 {\ntls maybe\n}":        `kafka tls "maybe"`,
		"kafka b:9093 {\ncompression zstd\n}": `unknown kafka option "compression"`,
	} {
		_, err := adapt(t, "{\n\tpracticegw {\n"+block+"\nfirm frm_x\n\t}\n}\n:8080 {\n\trespond ok\n}\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", block, err, want)
		}
	}
}

// secrets_key (in the golden file with a placeholder) may be left without
// a value, as an unset {$VAR} leaves it: the variable is the default.
func TestAdaptSecretsKey(t *testing.T) {
	out, err := adapt(t, "{\n\tpracticegw {\n\t\tsecrets_key\n\t\tfirm frm_x\n\t}\n}\n:8080 {\n\trespond ok\n}\n")
	if err != nil || strings.Contains(string(out), "secrets_key") {
		t.Errorf("secrets_key without a value: %s, %v", out, err)
	}
	if _, err := adapt(t, "{\n\tpracticegw {\n\t\tsecrets_key a b\n\t\tfirm frm_x\n\t}\n}\n:8080 {\n\trespond ok\n}\n"); err == nil {
		t.Error("secrets_key with two values adapted")
	}
}

// unsetEnvironment empties every variable of the environment's table for
// the test, so that what a Caddyfile adapts to is its own and the
// defaults, whatever the machine running the test has set.
func unsetEnvironment(t *testing.T) {
	for _, v := range envconfig.Vars {
		t.Setenv(v.Name, "")
	}
}

// What practicegw adapt prints is what the gateway runs with: each option
// the Caddyfile leaves out from its variable, else its default, and
// secrets as placeholders, never their values.
func TestAdaptShowsTheEffectiveConfiguration(t *testing.T) {
	unsetEnvironment(t)
	secrets := map[string]string{
		"PRACTICEGW_REDIS":               "rediss://:hunter2@redis.internal:6380/0",
		"PRACTICEGW_SECRETS_KEY":         "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=",
		"PRACTICEGW_KAFKA_SASL_PASSWORD": "correct horse",
	}
	for name, value := range secrets {
		t.Setenv(name, value)
	}
	t.Setenv("PRACTICEGW_SYNC_POLL", "15s")
	t.Setenv("PRACTICEGW_DISPATCH", "off")
	out, err := adapt(t, "{\n\tpracticegw {\n\t\tdispatch embedded\n\t\tfirm frm_acme {\n\t\t\trecords demo\n\t\t}\n\t}\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range secrets {
		if strings.Contains(string(out), value) {
			t.Errorf("the adapted configuration shows a secret: %s", out)
		}
	}
	var cfg struct {
		Apps struct {
			App struct {
				DataDir       string `json:"data_dir"`
				Redis         string `json:"redis"`
				SecretsKey    string `json:"secrets_key"`
				Dispatch      string `json:"dispatch"`
				KafkaSecurity struct {
					Password string `json:"sasl_password"`
				} `json:"kafka_security"`
				Sync struct {
					Poll int64 `json:"poll"`
				} `json:"sync"`
			} `json:"practicegw"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	app := cfg.Apps.App
	for what, c := range map[string]struct{ got, want any }{
		"a default":            {app.DataDir, "./data"},
		"a variable":           {app.Sync.Poll, int64(15 * time.Second)},
		"the Caddyfile's word": {app.Dispatch, "embedded"},
		"the Redis URL":        {app.Redis, "{env.PRACTICEGW_REDIS}"},
		"the secrets key":      {app.SecretsKey, "{env.PRACTICEGW_SECRETS_KEY}"},
		"the SASL password":    {app.KafkaSecurity.Password, "{env.PRACTICEGW_KAFKA_SASL_PASSWORD}"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", what, c.got, c.want)
		}
	}
}
