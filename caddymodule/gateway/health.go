package gateway

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/caddymodule/health"
)

// Readiness implements health.Checker: the embedded store, Redis and
// Kafka when configured, and each firm's upstream breakers. Details say
// what failed in words anyone may read; the errors behind them go to the
// log and the admin endpoint only.
func (a *App) Readiness(ctx context.Context) []health.Check {
	checks := []health.Check{{Name: "store", Critical: true, OK: true}}
	if err := a.shared.db.View(func(*bolt.Tx) error { return nil }); err != nil {
		checks[0].OK, checks[0].Detail, checks[0].Err = false, "the embedded store cannot be read", err
	}
	if a.redis != nil {
		c := health.Check{Name: "redis", Critical: true, OK: true}
		if err := a.redis.client.Ping(ctx).Err(); err != nil {
			c.OK, c.Detail, c.Err = false, "Redis does not answer", err
		}
		checks = append(checks, c)
	}
	if p := a.dispatch.prober; p != nil {
		// The prober's last answer: a probe opens no connection of its own.
		c := health.Check{Name: "kafka", Critical: true, OK: true}
		if ok, err := p.Ready(); !ok {
			c.OK, c.Detail, c.Err = false, "no Kafka broker answered", err
		}
		checks = append(checks, c)
	}
	if a.cluster != nil {
		ok, detail := a.cluster.Check()
		checks = append(checks, health.Check{Name: "read model placement", OK: ok, Detail: detail})
	}
	checks = append(append(checks, a.upstreamChecks()...), a.syncChecks()...)
	return append(checks, a.connectionChecks()...)
}
