package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

// What the handlers find the app for (ctx.App("practicegw")), each
// through the small interface its package declares: the app hands over
// the part that answers it.

// Credentials implements auth.RegistryProvider.
func (a *App) Credentials() *auth.Registry { return a.registry }

// Systems returns the systems serving a tenant: the firm's configured
// systems for live records, the seeded demo records for its sandbox.
func (a *App) Systems(t practice.Tenant) (api.Systems, bool) {
	s, ok := a.firms.Systems(t)
	if !ok {
		return nil, false
	}
	return s, true
}

// Idempotency returns the store of idempotency keys.
func (a *App) Idempotency() api.IdempotencyStore { return a.stores.gateway }

// Deprecations are the routes the configuration marks for retirement.
func (a *App) Deprecations() []api.Deprecation { return a.Deprecated }

// CursorKey seals the API's paging cursors, the same on every instance.
func (a *App) CursorKey() []byte { return a.cursorKey }

// Connections is the service behind /v1/connections, the console's
// Systems page and practicegw connect; nil when the configuration
// registers no vendor app.
func (a *App) Connections() api.ConnectionService {
	if a.connector == nil {
		return nil
	}
	return a.connector
}

// FirmName is a firm's display name, false for a firm the gateway does
// not serve.
func (a *App) FirmName(id string) (string, bool) { return a.firms.FirmName(id) }

// DemoRoles are the roles the firm's block leaves to the demo records
// (Firm.Demo), for the console to say so.
func (a *App) DemoRoles(firm string) []string { return a.firms.DemoRoles(firm) }

// SyncStatus reports each of a firm's real systems' sync, for the console
// and the admin routes, with the instances that hold the firm when
// instances share the firms.
func (a *App) SyncStatus(firm string) []readmodel.Status {
	out := a.firms.SyncStatus(firm)
	if a.cluster != nil && len(out) > 0 {
		held := a.cluster.Holders(firm)
		for i := range out {
			out[i].HeldBy = held
		}
	}
	return out
}

// Resync asks a firm system's sync to reconcile now, wherever it runs.
func (a *App) Resync(ctx context.Context, firm, system string) error {
	return a.firms.Resync(ctx, firm, system)
}

// Roles says how each of a firm's roles is served.
func (a *App) Roles(firm string) []adminapi.RoleView { return a.firms.Roles(firm) }

// IngestHandler is the vendor webhook receiver of a firm's system in a
// role (records or ledger).
func (a *App) IngestHandler(firm, role string) (http.Handler, error) {
	return a.firms.IngestHandler(firm, role)
}

// FirmWebhook is the receiver of a firm's Caddyfile system's webhooks.
func (a *App) FirmWebhook(firm, system string) (http.Handler, bool) {
	return a.firms.FirmWebhook(firm, system)
}

// ConnectionWebhook is the receiver of a connected system's webhooks.
func (a *App) ConnectionWebhook(system, connection string) (http.Handler, bool) {
	return a.firms.ConnectionWebhook(system, connection)
}

// Forward is the cluster's: a request for a firm held elsewhere is
// answered through one of its holders (false when this instance answers
// it). A write whose holder went away while answering is answered here
// with 503 rather than made twice.
func (a *App) Forward(w http.ResponseWriter, r *http.Request, cred *credential.Credential, k practice.Kind) bool {
	if a.cluster == nil {
		return false
	}
	done, err := a.cluster.Forward(w, r, cred, k)
	if errors.Is(err, cluster.ErrHolderGone) {
		apierror.Write(w, r, apierror.New(http.StatusServiceUnavailable, "upstream_unavailable",
			"The instance holding this firm's records went away while answering; retry the request (with its Idempotency-Key, if it is a write).").
			WithHeader("Retry-After", "1"))
		return true
	}
	return done
}

// Forwarded reads a request another instance forwarded (cluster.Forwarded).
func (a *App) Forwarded(r *http.Request) (*http.Request, *credential.Credential, error) {
	return a.cluster.Forwarded(r)
}

// Readiness implements health.Checker: the stores, Kafka when configured,
// the placement, and each firm's upstream breakers, syncs and
// connections. Details say what failed in words anyone may read; the
// errors behind them go to the log and the admin endpoint only.
func (a *App) Readiness(ctx context.Context) []health.Check {
	checks := a.stores.checks(ctx)
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
	for _, c := range a.firms.Checks(time.Now()) {
		checks = append(checks, health.Check{Name: c.Name, OK: c.OK, Detail: c.Detail, Err: c.Err})
	}
	return checks
}

// LimiterSettings are what a practicegw_ratelimit handler that names no
// ceiling or Redis of its own takes: the app's, so that rate limits live
// where the rest of the shared store does.
func (a *App) LimiterSettings() ratelimit.AppSettings {
	if a.CheckOnly {
		// A configuration only checked dials no Redis: its limiter
		// decides in process.
		return ratelimit.AppSettings{Rate: a.RateLimit}
	}
	return ratelimit.AppSettings{Rate: a.RateLimit, Redis: a.Redis, RedisTLS: a.RedisTLS}
}

// UsageStore is where the embedded limiter keeps hourly usage: the
// embedded file, held open for the limiter until release, so that the
// usage it writes when its last config lets go of it (a stop, a reload)
// reaches the file whichever module Caddy cleans up first.
func (a *App) UsageStore() (ratelimit.UsageStore, func()) {
	return a.stores.shared.store, a.stores.retain()
}

// limiterRef is the rate limiter the practicegw_ratelimit handler
// attached, so that listings and the console can read usage and headroom.
type limiterRef struct {
	mu      sync.RWMutex
	limiter *ratelimit.Limiter
	rateFor func(*credential.Credential) ratelimit.Rate
}

// AttachLimiter records the limiter serving this config's routes.
func (a *App) AttachLimiter(l *ratelimit.Limiter, rateFor func(*credential.Credential) ratelimit.Rate) {
	a.limiter.mu.Lock()
	defer a.limiter.mu.Unlock()
	a.limiter.limiter, a.limiter.rateFor = l, rateFor
}

// CountUse counts a request the console served its signed-in
// administrator in the credential's traffic, spending none of its
// ceiling; nothing is counted without a rate limiter.
func (a *App) CountUse(credentialID string) {
	a.limiter.mu.RLock()
	l := a.limiter.limiter
	a.limiter.mu.RUnlock()
	if l != nil {
		l.Count(credentialID)
	}
}

// Traffic returns a credential's usage per hour since a time and its
// current headroom; ok is false when no rate limiter is configured.
func (a *App) Traffic(ctx context.Context, c *credential.Credential, since time.Time) (usage.Traffic, bool, error) {
	a.limiter.mu.RLock()
	l, rateFor := a.limiter.limiter, a.limiter.rateFor
	a.limiter.mu.RUnlock()
	if l == nil {
		return usage.Traffic{}, false, nil
	}
	rate := rateFor(c)
	hours, err := l.Usage(ctx, c.ID, since)
	if err != nil {
		return usage.Traffic{}, true, err
	}
	d := l.Peek(ctx, c.ID, rate)
	return usage.Traffic{Ceiling: rate.String(), Limit: rate.Limit, Window: int64(rate.Window / time.Second),
		Headroom: d.Remaining, Hours: hours}, true, nil
}
