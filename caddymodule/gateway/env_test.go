package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/caddymodule/gateway"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
)

// A configuration that names no Redis, run with PRACTICEGW_REDIS set,
// keeps the gateway's shared state in that Redis, as the rate limiter
// always did: the variable's documented default applies to the app, from
// a Caddyfile and from a JSON configuration alike, instead of leaving the
// credentials in bbolt and the rate limits in Redis without a word.
func TestRedisFromTheEnvironmentHoldsTheAppsState(t *testing.T) {
	srv := redistest.Start(t)
	_, key := sealed.Random()
	t.Setenv("PRACTICEGW_REDIS", srv.URL())
	t.Setenv("PRACTICEGW_SECRETS_KEY", key)
	t.Setenv("PRACTICEGW_DISPATCH", "off")
	t.Setenv("PRACTICEGW_DATA", t.TempDir())

	caddyfile := "{\n\tadmin off\n\tpersist_config off\n\tpracticegw {\n\t\tfirm frm_acme {\n\t\t\trecords demo\n\t\t}\n\t}\n}\n"
	adapted, err := adapt(t, caddyfile)
	if err != nil {
		t.Fatal(err)
	}
	var fromCaddyfile struct {
		Apps struct {
			Practicegw struct {
				Redis string `json:"redis"`
			} `json:"practicegw"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(adapted, &fromCaddyfile); err != nil {
		t.Fatal(err)
	}
	if got := fromCaddyfile.Apps.Practicegw.Redis; got != "{env.PRACTICEGW_REDIS}" {
		t.Errorf("a Caddyfile without a redis line adapts to redis %q, want the variable's placeholder", got)
	}

	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	for name, cfg := range map[string]string{
		"caddyfile": string(adapted),
		"json":      `{"admin":{"disabled":true,"config":{"persist":false}},"apps":{"practicegw":{"firms":[{"id":"frm_acme"}]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := caddy.Load([]byte(cfg), true); err != nil {
				t.Fatal(err)
			}
			defer caddy.Stop()
			keys, err := rdb.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) == 0 {
				t.Fatal("the gateway started with PRACTICEGW_REDIS set and kept nothing in Redis")
			}
		})
	}
}

// practicegw dispatcher reads the variables a gateway reads, with the same
// defaults, from the same table.
func TestDispatcherConfigFromTheEnvironment(t *testing.T) {
	_, key := sealed.Random()
	for name, value := range map[string]string{
		"PRACTICEGW_KAFKA":                          " k1:9092, k2:9092 ,",
		"PRACTICEGW_REDIS":                          "redis://r:6379/2",
		"PRACTICEGW_REDIS_TLS_CA":                   "/etc/redis-ca.pem",
		"PRACTICEGW_KAFKA_CHANGES_TOPIC":            "acme.changes",
		"PRACTICEGW_KAFKA_PARTITIONS":               "12",
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS":            "10.0.0.0/8",
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE":           "1m30s",
		"PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN":       "1d2h",
		"PRACTICEGW_WEBHOOK_MAX_IN_FLIGHT_PER_FIRM": "9",
		"PRACTICEGW_SECRETS_KEY":                    key,
	} {
		t.Setenv(name, value)
	}
	cfg, err := gateway.DispatcherConfig(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	// Which Redis it opens, over which TLS files and with which key, its
	// Open shows (TestDispatcherSaysWhatItLacksInOrder,
	// TestDispatcherReadiesTheStoreOnceKafkaAnswers).
	if strings.Join(cfg.Brokers, ",") != "k1:9092,k2:9092" || cfg.Open == nil ||
		cfg.Topics.Changes != "acme.changes" || cfg.Topics.Events != "practicegw.events" || cfg.Group != "practicegw-dispatcher" ||
		cfg.Partitions != 12 || len(cfg.Engine.AllowCIDRs) != 1 || cfg.Engine.BackoffBase != 90*time.Second ||
		cfg.Engine.BreakerCooldown != 26*time.Hour || cfg.Engine.MaxInFlightPerFirm != 9 || cfg.Engine.MaxEndpoints != 50 ||
		cfg.Engine.BackoffFactor != 6 || cfg.Engine.Retention != 720*time.Hour {
		t.Fatalf("config %+v", cfg)
	}

	for name, bad := range map[string]string{
		"PRACTICEGW_KAFKA_PARTITIONS":               "0",
		"PRACTICEGW_WEBHOOK_MAX_ENDPOINTS":          "many",
		"PRACTICEGW_WEBHOOK_MAX_IN_FLIGHT_PER_FIRM": "-1",
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE":           "-1s",
		"PRACTICEGW_WEBHOOK_BACKOFF_FACTOR":         "0.5",
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS":            "10.0.0.0",
		"PRACTICEGW_WEBHOOK_RETENTION":              "0s",
		"PRACTICEGW_SECRETS_KEY":                    "REPLACE_ME_WITH_OPENSSL_RAND_BASE64_32",
		"PRACTICEGW_KAFKA_TLS":                      "yes please",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := gateway.DispatcherConfig(os.LookupEnv); err == nil {
				t.Errorf("%s=%q was accepted", name, bad)
			}
		})
	}
}
