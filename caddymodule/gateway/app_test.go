package gateway

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/caddymodule/api"
)

func TestSettingFallsBackToItsVariableThenTheDefault(t *testing.T) {
	t.Setenv("PRACTICEGW_TEST_SETTING", "from-env")
	t.Setenv("PRACTICEGW_TEST_EMPTY", "")
	repl := caddy.NewReplacer()
	for _, tc := range []struct{ value, variable, want string }{
		{"configured", "PRACTICEGW_TEST_SETTING", "configured"},
		{"", "PRACTICEGW_TEST_SETTING", "from-env"},
		{"{env.PRACTICEGW_TEST_EMPTY}", "PRACTICEGW_TEST_SETTING", "from-env"},
		{"{env.PRACTICEGW_TEST_SETTING}", "PRACTICEGW_TEST_EMPTY", "from-env"},
		{"", "PRACTICEGW_TEST_EMPTY", "default"},
	} {
		if got := setting(repl, tc.value, tc.variable, "default"); got != tc.want {
			t.Errorf("setting(%q, %s) = %q, want %q", tc.value, tc.variable, got, tc.want)
		}
	}
}

func TestValidateRefusesWhatCannotWork(t *testing.T) {
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		app  App
		ok   bool
	}{
		{"one firm", App{Firms: []Firm{{ID: "frm_a"}}}, true},
		{"a firm twice", App{Firms: []Firm{{ID: "frm_a"}, {ID: "frm_a"}}}, false},
		{"a key without a secret", App{SigningKeys: []SigningKeyConfig{{ID: "k1"}}}, false},
		{"a key twice", App{SigningKeys: []SigningKeyConfig{{ID: "k1", Secret: "x"}, {ID: "k1", Secret: "y"}}}, false},
		{"a sunset before its deprecation", App{Deprecated: []api.Deprecation{{Method: "GET", Path: "/v1/jobs",
			Since: day, Sunset: day.AddDate(0, -1, 0)}}}, false},
		{"a negative webhook timeout", App{Webhooks: WebhookConfig{Timeout: -1}}, false},
	} {
		if err := tc.app.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
}

// The gateway reaches secured brokers as the standalone dispatcher does:
// each Kafka security setting from the Caddyfile, else its variable; and
// settings that cannot work stop it at start.
func TestKafkaSecurity(t *testing.T) {
	repl := caddy.NewReplacer()
	t.Setenv("PRACTICEGW_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("PRACTICEGW_KAFKA_SASL_USERNAME", "gateway")
	t.Setenv("PRACTICEGW_KAFKA_SASL_PASSWORD", "from-env")
	t.Setenv("PRACTICEGW_KAFKA_TLS", "true")
	a := &App{}
	sec, err := a.kafkaSecurity(repl)
	if err != nil {
		t.Fatal(err)
	}
	if sec.TLS == nil || sec.SASL == nil || sec.SASL.Name() != "SCRAM-SHA-512" {
		t.Fatalf("from the environment: TLS %v, SASL %v", sec.TLS, sec.SASL)
	}
	a.KafkaSecurity.SASLMechanism, a.KafkaSecurity.Username, a.KafkaSecurity.Password = "PLAIN", "configured", "{env.PRACTICEGW_KAFKA_SASL_PASSWORD}"
	if sec, err = a.kafkaSecurity(repl); err != nil || sec.SASL.Name() != "PLAIN" {
		t.Fatalf("configured: %v, %v", sec.SASL, err)
	}
	a.KafkaSecurity.SASLMechanism = "GSSAPI"
	if _, err := a.kafkaSecurity(repl); err == nil {
		t.Fatal("an unknown SASL mechanism was accepted")
	}
	t.Setenv("PRACTICEGW_KAFKA_TLS", "perhaps")
	if _, err := (&App{}).kafkaSecurity(repl); err == nil {
		t.Fatal("PRACTICEGW_KAFKA_TLS=perhaps was accepted")
	}
}
