package kafka

import (
	"slices"
	"strings"
	"testing"
)

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"PRACTICEGW_KAFKA":               " k1:9092, k2:9092 ,",
		"PRACTICEGW_REDIS":               "redis://r:6379/2",
		"PRACTICEGW_KAFKA_CHANGES_TOPIC": "acme.changes",
		"PRACTICEGW_KAFKA_PARTITIONS":    "12",
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS": "10.0.0.0/8",
		"PRACTICEGW_SECRETS_KEY":         "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY=",
	}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Brokers, []string{"k1:9092", "k2:9092"}) || cfg.Redis != "redis://r:6379/2" ||
		cfg.Topics != (Topics{Changes: "acme.changes", Events: DefaultEventsTopic}) || cfg.Group != DefaultGroup ||
		cfg.Partitions != 12 || len(cfg.Engine.AllowCIDRs) != 1 || cfg.Secrets == nil {
		t.Fatalf("config %+v", cfg)
	}

	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"PRACTICEGW_REDIS": "redis://r"}, "PRACTICEGW_KAFKA"},
		{map[string]string{"PRACTICEGW_KAFKA": "k:9092"}, "PRACTICEGW_REDIS"},
		{map[string]string{"PRACTICEGW_KAFKA": "k:9092", "PRACTICEGW_REDIS": "redis://r"}, "PRACTICEGW_SECRETS_KEY"},
		{map[string]string{"PRACTICEGW_KAFKA": "k:9092", "PRACTICEGW_REDIS": "redis://r",
			"PRACTICEGW_SECRETS_KEY": "REPLACE_ME_WITH_OPENSSL_RAND_BASE64_32"}, "PRACTICEGW_SECRETS_KEY"},
		{map[string]string{"PRACTICEGW_KAFKA": "k:9092", "PRACTICEGW_REDIS": "redis://r", "PRACTICEGW_SECRETS_KEY": env["PRACTICEGW_SECRETS_KEY"],
			"PRACTICEGW_KAFKA_EVENTS_TOPIC": DefaultChangesTopic}, "must differ"},
	} {
		cfg, err := ConfigFromEnv(func(k string) string { return tt.env[k] })
		if err == nil {
			_, err = cfg.withDefaults()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("env %v: error %v, want one naming %s", tt.env, err, tt.want)
		}
	}
	if _, err := ConfigFromEnv(func(k string) string {
		return map[string]string{"PRACTICEGW_KAFKA_PARTITIONS": "0"}[k]
	}); err == nil {
		t.Error("0 partitions accepted")
	}
}
