package gateway

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/caddymodule/api"
)

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

// Validate says every problem, one an error of its own; a configuration
// only checked (check_only, practicegw validate) is never started.
func TestValidateSaysEveryProblemAndACheckedConfigNeverRuns(t *testing.T) {
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	app := App{Firms: []Firm{{ID: "frm_a"}, {ID: "frm_a"}}, Webhooks: WebhookConfig{Timeout: -1},
		Deprecated: []api.Deprecation{{Method: "GET", Path: "/v1/jobs", Since: day, Sunset: day}}}
	err := app.Validate()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 3 {
		t.Errorf("Validate() = %v, want the three problems apart", err)
	}
	checked := App{CheckOnly: true}
	if err := checked.Start(); err == nil || !strings.Contains(err.Error(), "check_only") {
		t.Errorf("a configuration only checked starts: %v", err)
	}
}

// The gateway reaches secured brokers as the standalone dispatcher does:
// each Kafka security setting from the configuration, else its variable
// through the environment's table; and settings that cannot work stop it
// at start.
func TestKafkaSecurity(t *testing.T) {
	repl := caddy.NewReplacer()
	t.Setenv("PRACTICEGW_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("PRACTICEGW_KAFKA_SASL_USERNAME", "gateway")
	t.Setenv("PRACTICEGW_KAFKA_SASL_PASSWORD", "from-env")
	t.Setenv("PRACTICEGW_KAFKA_TLS", "true")
	a := &App{}
	if err := applyEnvironment(a, os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	sec, err := kafkaSecurity(repl, a.KafkaSecurity)
	if err != nil {
		t.Fatal(err)
	}
	if sec.TLS == nil || sec.SASL == nil || sec.SASL.Name() != "SCRAM-SHA-512" {
		t.Fatalf("from the environment: TLS %v, SASL %v", sec.TLS, sec.SASL)
	}
	a = &App{}
	a.KafkaSecurity.SASLMechanism, a.KafkaSecurity.Username, a.KafkaSecurity.Password = "PLAIN", "configured", "{env.PRACTICEGW_KAFKA_SASL_PASSWORD}"
	if err := applyEnvironment(a, os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	if sec, err = kafkaSecurity(repl, a.KafkaSecurity); err != nil || sec.SASL.Name() != "PLAIN" {
		t.Fatalf("configured: %v, %v", sec.SASL, err)
	}
	a.KafkaSecurity.SASLMechanism = "GSSAPI"
	if _, err := kafkaSecurity(repl, a.KafkaSecurity); err == nil {
		t.Fatal("an unknown SASL mechanism was accepted")
	}
	t.Setenv("PRACTICEGW_KAFKA_TLS", "perhaps")
	if err := applyEnvironment(&App{}, os.LookupEnv); err == nil || !strings.Contains(err.Error(), "PRACTICEGW_KAFKA_TLS") {
		t.Fatalf("PRACTICEGW_KAFKA_TLS=perhaps: %v, want an error naming it", err)
	}
}

// A practicegw_ratelimit that names no ceiling or Redis takes the app's,
// which the environment's table filled: rate limits and the rest of the
// shared state cannot part.
func TestLimiterTakesTheAppsSettings(t *testing.T) {
	t.Setenv("PRACTICEGW_RATE_LIMIT", "5/m")
	t.Setenv("PRACTICEGW_REDIS", "redis://r:6379/3")
	t.Setenv("PRACTICEGW_REDIS_TLS_CA", "/etc/redis-ca.pem")
	a := &App{}
	if err := applyEnvironment(a, os.LookupEnv); err != nil {
		t.Fatal(err)
	}
	repl := caddy.NewReplacer()
	a.Redis, a.RateLimit = expand(repl, a.Redis), expand(repl, a.RateLimit)
	got := a.LimiterSettings()
	if got.Rate != "5/m" || got.Redis != "redis://r:6379/3" || got.RedisTLS.CA != "/etc/redis-ca.pem" {
		t.Fatalf("limiter settings %+v", got)
	}
}
