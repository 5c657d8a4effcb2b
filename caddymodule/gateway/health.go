package gateway

import (
	"context"
	"net"

	bolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/caddymodule/health"
)

// Readiness implements health.Checker: the embedded store and, when
// configured, Redis.
func (a *App) Readiness(ctx context.Context) []health.Check {
	checks := []health.Check{{Name: "store", Critical: true, OK: true}}
	if err := a.shared.db.View(func(*bolt.Tx) error { return nil }); err != nil {
		checks[0].OK, checks[0].Detail = false, err.Error()
	}
	if a.redis != nil {
		c := health.Check{Name: "redis", Critical: true, OK: true}
		if err := a.redis.client.Ping(ctx).Err(); err != nil {
			c.OK, c.Detail = false, err.Error()
		}
		checks = append(checks, c)
	}
	if brokers := a.dispatch.brokers; len(brokers) > 0 {
		c := health.Check{Name: "kafka", Critical: true, OK: false, Detail: "no broker answered"}
		for _, b := range brokers {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", b)
			if err == nil {
				conn.Close()
				c.OK, c.Detail = true, ""
				break
			}
		}
		checks = append(checks, c)
	}
	return append(checks, a.upstreamChecks()...)
}
