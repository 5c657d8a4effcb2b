package gateway_test

import (
	"encoding/json"
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

// adapt runs Caddy's own Caddyfile adapter in process.
func adapt(t *testing.T, caddyfile string) ([]byte, error) {
	t.Helper()
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	for _, w := range warnings {
		t.Errorf("warning: %s", w.Message)
	}
	return out, err
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
