package gateway_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/practicegw/practicegw/caddymodule/gateway"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// dispatcherVars are the variables these tests set or leave unset.
var dispatcherVars = []string{"PRACTICEGW_KAFKA", "PRACTICEGW_REDIS", "PRACTICEGW_REDIS_TLS_CA", "PRACTICEGW_SECRETS_KEY",
	"PRACTICEGW_KAFKA_CHANGES_TOPIC", "PRACTICEGW_KAFKA_EVENTS_TOPIC"}

// startDispatcher is `practicegw dispatcher` with env as the environment
// of dispatcherVars, until it fails or ctx ends.
func startDispatcher(ctx context.Context, t *testing.T, env map[string]string) error {
	for _, name := range dispatcherVars {
		// Set, so that the test restores it, then unset unless env has it:
		// placeholders expand from the process's environment.
		t.Setenv(name, "")
		if v, ok := env[name]; ok {
			t.Setenv(name, v)
		} else {
			os.Unsetenv(name)
		}
	}
	cfg, err := gateway.DispatcherConfig(os.LookupEnv)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Gatherer = reg, reg
	return kafka.Run(ctx, cfg)
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// practicegw dispatcher says first what its environment lacks, in one
// order (Kafka, Redis, the secrets key, then distinct topics), whatever
// else is missing too.
func TestDispatcherSaysWhatItLacksInOrder(t *testing.T) {
	_, key := sealed.Random()
	const (
		needsKafka = "practicegw dispatcher needs Kafka: set PRACTICEGW_KAFKA to the brokers"
		needsRedis = "practicegw dispatcher needs Redis for delivery state shared with the gateways: set PRACTICEGW_REDIS"
		needsKey   = "practicegw dispatcher needs the key the gateways seal webhook endpoint secrets with: set PRACTICEGW_SECRETS_KEY"
		sameTopics = `the changes and events topics are both "t"; they must differ`
	)
	kafkaVar := map[string]string{"PRACTICEGW_KAFKA": closedAddr(t)}
	redisVar := map[string]string{"PRACTICEGW_REDIS": "redis://" + closedAddr(t) + "/0"}
	keyVar := map[string]string{"PRACTICEGW_SECRETS_KEY": key}
	same := map[string]string{"PRACTICEGW_KAFKA_CHANGES_TOPIC": "t", "PRACTICEGW_KAFKA_EVENTS_TOPIC": "t"}
	for _, c := range []struct {
		name string
		env  []map[string]string
		want string
	}{
		{"nothing", nil, needsKafka},
		{"all but kafka", []map[string]string{redisVar, keyVar, same}, needsKafka},
		{"kafka alone", []map[string]string{kafkaVar}, needsRedis},
		{"all but redis", []map[string]string{kafkaVar, keyVar, same}, needsRedis},
		{"no key", []map[string]string{kafkaVar, redisVar, same}, needsKey},
		{"same topics", []map[string]string{kafkaVar, redisVar, keyVar, same}, sameTopics},
		// Redis is dialled before Kafka: neither answers here.
		{"nothing answers", []map[string]string{kafkaVar, redisVar, keyVar}, "redis at " + strings.TrimPrefix(strings.TrimSuffix(redisVar["PRACTICEGW_REDIS"], "/0"), "redis://") + " does not answer"},
		{"a TLS file for redis://", []map[string]string{kafkaVar, redisVar, keyVar, {"PRACTICEGW_REDIS_TLS_CA": "/etc/ca.pem"}}, "PRACTICEGW_REDIS: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for _, m := range c.env {
				for k, v := range m {
					env[k] = v
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := startDispatcher(ctx, t, env); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("practicegw dispatcher with %v: %v, want %q", env, err, c.want)
			}
		})
	}
}

// practicegw dispatcher readies the shared store only once Kafka answers
// and its topics exist: one that cannot reach Kafka leaves Redis as it
// was, and one with the wrong secrets key has created the topics by the
// time the store refuses it.
func TestDispatcherReadiesTheStoreOnceKafkaAnswers(t *testing.T) {
	srv := redistest.Start(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, key := sealed.Random()
	env := map[string]string{"PRACTICEGW_KAFKA": closedAddr(t), "PRACTICEGW_REDIS": srv.URL(), "PRACTICEGW_SECRETS_KEY": key}
	if err := startDispatcher(ctx, t, env); err == nil || !strings.Contains(err.Error(), "kafka: no broker") {
		t.Fatalf("practicegw dispatcher without Kafka: %v", err)
	}
	if keys, err := rdb.Keys(ctx, "*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("a dispatcher that never reached Kafka left %v in Redis (%v)", keys, err)
	}

	// The gateways sealed under one key; this dispatcher has another.
	gatewayKey, _ := sealed.Random()
	store, err := redisstore.New(rdb, redisstore.Options{Secrets: gatewayKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PrepareSecrets(ctx); err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	env["PRACTICEGW_KAFKA"] = strings.Join(cluster.ListenAddrs(), ",")
	err = startDispatcher(ctx, t, env)
	if err == nil || !strings.HasPrefix(err.Error(), "PRACTICEGW_SECRETS_KEY: ") || !strings.Contains(err.Error(), sealed.ErrWrongKey.Error()) {
		t.Fatalf("practicegw dispatcher with another key: %v", err)
	}
	conn, err := kafkago.DialContext(ctx, "tcp", cluster.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, topic := range []string{"practicegw.changes", "practicegw.events"} {
		if parts, err := conn.ReadPartitions(topic); err != nil || len(parts) == 0 {
			t.Errorf("topic %s before the store refused the key: %d partitions, %v", topic, len(parts), err)
		}
	}
}
