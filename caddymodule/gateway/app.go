// Package gateway is the practicegw Caddy app: the firms the gateway
// serves, the backends behind each, and the store every practicegw handler
// shares (the embedded database, the credential registry, idempotency
// keys). Handlers find it with ctx.App("practicegw").
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/caddymodule/admin"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/caddymodule/console"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/firms"

	"github.com/practicegw/practicegw/caddymodule/api"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/ratelimit"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the practicegw app module.
//
// A field the configuration leaves out takes its environment variable's
// value, else its default, from the one table of them
// (internal/envconfig), applied when the Caddyfile is adapted and again
// before the app is provisioned (for a JSON configuration); what the
// variables and defaults are is said below with each field. The app then
// only expands the placeholders its configuration holds.
type App struct {
	// DataDir holds the embedded database. Default ./data
	// (PRACTICEGW_DATA).
	DataDir string `json:"data_dir,omitempty"`

	// Redis, when set (redis://host:port/db, rediss:// for TLS), moves
	// credentials, idempotency keys, rate limits and delivery state to
	// Redis so that any number of gateways share them
	// (PRACTICEGW_REDIS, as its placeholder: the URL may hold a password).
	Redis string `json:"redis,omitempty"`

	// RedisTLS are the files a rediss:// connection is made with: the
	// authorities that sign Redis's certificate, and a client certificate
	// and key (PRACTICEGW_REDIS_TLS_CA, _CERT, _KEY). Every Redis client
	// of the process uses them, the rate limiter's included.
	RedisTLS redisstore.TLSFiles `json:"redis_tls,omitzero"`

	// Kafka, when set (comma-separated brokers), sends change records
	// through the changes topic to the processes that deliver webhooks.
	// Needs Redis (PRACTICEGW_KAFKA).
	Kafka string `json:"kafka,omitempty"`

	// RateLimit is the ceiling of credentials without their own, for
	// every practicegw_ratelimit handler that names none: N/s, N/m or
	// N/h. Default 7200/h (PRACTICEGW_RATE_LIMIT).
	RateLimit string `json:"rate_limit,omitempty"`

	// SigningKeys sign and verify credential tokens; the first signs.
	// Without any, the gateway generates one and keeps it in its store,
	// sealed under SecretsKey. A key published in practicegw's repository
	// (the examples' placeholders) is refused.
	SigningKeys []SigningKeyConfig `json:"signing_keys,omitempty"`

	// SecretsKey seals the generated signing key and webhook endpoint
	// secrets in the store: base64 of 32 random bytes, usually a
	// placeholder such as {file./run/secrets/practicegw_secrets_key}.
	// Default {env.PRACTICEGW_SECRETS_KEY} when that is set. Without either, a gateway
	// alone generates one in data_dir/secrets.key (and says so in the log);
	// one with Redis refuses to start, since every instance and dispatcher
	// needs the same key.
	SecretsKey string `json:"secrets_key,omitempty"`

	// KafkaChangesTopic, KafkaEventsTopic and KafkaGroup name the topics
	// and the dispatchers' consumer group. Defaults practicegw.changes,
	// practicegw.events and practicegw-dispatcher
	// (PRACTICEGW_KAFKA_CHANGES_TOPIC, _EVENTS_TOPIC, _GROUP), as
	// practicegw dispatcher reads them.
	KafkaChangesTopic string `json:"kafka_changes_topic,omitempty"`
	KafkaEventsTopic  string `json:"kafka_events_topic,omitempty"`
	KafkaGroup        string `json:"kafka_group,omitempty"`
	// KafkaPartitions is how many partitions practicegw dispatcher gives
	// a topic it creates. Default 6 (PRACTICEGW_KAFKA_PARTITIONS).
	KafkaPartitions int `json:"kafka_partitions,omitempty"`

	// SandboxTriggersPerMinute bounds each firm's sandbox triggers. Default
	// 60.
	SandboxTriggersPerMinute int `json:"sandbox_triggers_per_minute,omitempty"`

	// KafkaSecurity is how the brokers want to be reached: TLS and SASL.
	// Each field not set here takes its variable (PRACTICEGW_KAFKA_TLS,
	// _TLS_CA, _TLS_CERT, _TLS_KEY, _TLS_SERVER_NAME, _SASL_MECHANISM,
	// _SASL_USERNAME, and _SASL_PASSWORD as its placeholder), as
	// `practicegw dispatcher` does. Secrets may be placeholders such as
	// {file./run/secrets/kafka_password}.
	KafkaSecurity kafka.SecurityConfig `json:"kafka_security,omitzero"`

	// Dispatch is "embedded" (this process delivers webhooks) or "off" (a
	// separate practicegw dispatcher does). Default embedded
	// (PRACTICEGW_DISPATCH).
	Dispatch string `json:"dispatch,omitempty"`

	// Webhooks tunes delivery.
	Webhooks WebhookConfig `json:"webhooks,omitzero"`

	// Sync sets how often the read model of firms' real systems is
	// brought up to date.
	Sync SyncConfig `json:"sync,omitzero"`

	// ReadModel bounds the memory firms' read models take on each
	// instance; with Redis and a bound, each firm is held by a few
	// instances and the others send its requests to them.
	ReadModel ReadModelConfig `json:"read_model,omitzero"`

	// Firms are the firms this gateway serves.
	Firms []Firm `json:"firms,omitempty"`
	// Connect registers the vendor apps firms connect their own systems
	// through (POST /v1/connections), and where the gateway is reached.
	Connect *connect.Config `json:"connect,omitempty"`

	// Deprecated marks /v1 routes that answer with Deprecation, Sunset
	// and Link headers (and are marked in the OpenAPI document) until they
	// are retired.
	Deprecated []api.Deprecation `json:"deprecated,omitempty"`

	// CheckOnly marks a configuration that is checked, never run: practicegw
	// validate (and adapt --validate) sets it on the configuration it
	// checks. Provisioning then opens none of the stores (a throwaway
	// embedded store stands in, and neither Redis nor Kafka is reached),
	// so that checking the file of a running gateway waits for nothing and
	// changes nothing; Start refuses it.
	CheckOnly bool `json:"check_only,omitempty"`

	logger   *zap.Logger
	stores   *stores
	registry *auth.Registry
	// cursorKey seals the API's paging cursors.
	cursorKey []byte
	dispatch  *dispatch
	limiter   *limiterRef
	// firms is the firms' runtime; cluster places this instance's share
	// of their read models, nil when every instance holds every firm (no
	// bound, or no Redis); connector connects firms' own systems, nil
	// without a connect block.
	firms     *firms.Runtime
	cluster   *cluster.Cluster
	connector *connect.Manager
	// internal is where the other instances forward the requests of the
	// firms this one holds, with the cluster.
	internal *internalListener
	metrics  *metrics
	// ctx is Caddy's, for the start line.
	ctx    caddy.Context
	cancel context.CancelFunc
	wg     *sync.WaitGroup
}

// SigningKeyConfig is one credential signing key. Secret is base64 (at
// least 32 bytes decoded) and may be a placeholder such as
// {env.PRACTICEGW_SIGNING_KEY} or {file./run/secrets/signing_key}.
type SigningKeyConfig struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// Firm is one firm and the systems its records come from.
type Firm struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// RecordsRaw, LedgerRaw and DocumentsRaw are the firm's own systems in
	// each role, Caddy modules in the practicegw.systems.<role> namespaces
	// (see adapters/firmsystem).
	RecordsRaw   json.RawMessage `json:"records,omitempty" caddy:"namespace=practicegw.systems.records inline_key=system"`
	LedgerRaw    json.RawMessage `json:"ledger,omitempty" caddy:"namespace=practicegw.systems.ledger inline_key=system"`
	DocumentsRaw json.RawMessage `json:"documents,omitempty" caddy:"namespace=practicegw.systems.documents inline_key=system"`
	// Demo are the roles the firm's block leaves to the seeded demo
	// records (`records demo`). A live credential reads demo records only
	// there: a role the firm neither sets nor connects answers
	// system_not_connected, so that made-up records are never served as
	// the firm's own. A connection may still be made for a demo role.
	// Sandbox credentials always reach the demo records.
	Demo []string `json:"demo,omitempty"`
	// Engagements names the system the firm's engagements come from:
	// records, ledger or none. Default: the first of the records system
	// and the ledger that keeps proposals (Xero Practice Manager's quotes,
	// the Xero ledger's quotes), else the records system.
	Engagements string `json:"engagements,omitempty"`
	// LinkClients is "off" when the firm's ledger and document store,
	// its Caddyfile's and its connections', name no client; by default
	// ("records") each record names the firm's records system's client
	// for its customer or client folder where the match is certain, else
	// null.
	LinkClients string `json:"link_clients,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "practicegw",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision opens the stores, builds the parts (the credential registry,
// the webhook engine, the firms' runtime, the cluster, the connections
// manager) and hands each the others it works with.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger, a.ctx = ctx.Logger(), ctx
	a.limiter, a.wg = &limiterRef{}, new(sync.WaitGroup)
	var problems error
	if a.CheckOnly {
		// Checked, every problem is said at once: Validate's too.
		problems = a.Validate()
	}
	if err := a.provision(ctx); err != nil {
		return errors.Join(problems, fmt.Errorf("practicegw: %w", err))
	}
	return problems
}

func (a *App) provision(ctx caddy.Context) error {
	if err := applyEnvironment(a, os.LookupEnv); err != nil {
		return err
	}
	repl := caddy.NewReplacer()
	settings, err := a.storeSettings(repl)
	if err != nil {
		return err
	}
	if err := provisionConnectApps(ctx, a.Connect); err != nil {
		return err
	}
	if a.stores, err = openStores(ctx, settings, a.logger); err != nil {
		return err
	}
	keys, cursorKey, err := keyring(ctx, repl, a.SigningKeys, a.stores.gateway)
	if err != nil {
		return err
	}
	a.cursorKey = cursorKey
	a.registry = auth.NewRegistry(a.stores.gateway, keys, auth.RegistryConfig{Logger: a.logger.Named("credentials")})
	if a.metrics, err = registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	if a.dispatch, err = newDispatch(a, ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	return a.provisionParts(ctx, repl)
}

// Validate checks what Provision does not need in order to run: that
// firms and signing keys are named once each, and that deprecations and
// timeouts make sense.
func (a *App) Validate() error {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("practicegw: "+format, args...))
	}
	seen := map[string]bool{}
	for _, f := range a.Firms {
		if seen[f.ID] {
			bad("firm %s is configured twice", f.ID)
		}
		seen[f.ID] = true
		for _, role := range f.Demo {
			switch {
			case !slices.Contains(roles, role):
				bad("firm %s: demo role %q is none of %s", f.ID, role, strings.Join(roles, ", "))
			case f.sets(role):
				bad("firm %s: %s is set to demo records and to a system", f.ID, role)
			}
		}
	}
	keys := map[string]bool{}
	for i, k := range a.SigningKeys {
		switch {
		case k.ID == "" || k.Secret == "":
			bad("signing key %d needs an id and a secret", i)
		case keys[k.ID]:
			bad("signing key %q is configured twice", k.ID)
		}
		keys[k.ID] = true
	}
	for _, d := range a.Deprecated {
		if !d.Sunset.After(d.Since) {
			bad("deprecated %s %s: sunset %s is not after %s", d.Method, d.Path,
				d.Sunset.Format(time.DateOnly), d.Since.Format(time.DateOnly))
		}
	}
	if a.Webhooks.Timeout < 0 {
		bad("webhooks timeout %s is negative", time.Duration(a.Webhooks.Timeout))
	}
	// Every problem, one a line (practicegw validate says each).
	return errors.Join(problems...)
}

// Start runs the parts' background work: the embedded stores' expiry,
// webhook delivery, the firms' syncs and connections, the cluster and the
// connections' subscriptions.
func (a *App) Start() error {
	if a.CheckOnly {
		return errors.New("practicegw: this configuration is marked check_only, for practicegw validate: it is checked, never run")
	}
	if err := refuseOccupied(a.ctx, a.internal); err != nil {
		return fmt.Errorf("practicegw: %w", err)
	}
	if a.internal != nil {
		// Listening before the cluster says this instance holds a firm.
		if err := a.internal.start(a.ctx); err != nil {
			return fmt.Errorf("practicegw: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Go(func() {
		t := time.NewTicker(10 * time.Minute)
		defer t.Stop()
		for {
			a.stores.expire(ctx, a.logger)
			a.firms.SweepTombstones(ctx, time.Now())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	a.dispatch.start(a.stores.shared.demo, a.logger)
	a.firms.Start()
	if a.cluster != nil {
		a.wg.Go(func() { a.cluster.Run(ctx) })
	}
	if a.connector != nil {
		// Karbon's webhook subscriptions, checked every few minutes
		// (connect.SubscriptionCheck).
		a.wg.Go(func() { a.connector.Run(ctx) })
	}
	a.metrics.serve(a)
	sayWhereThingsAre(a.logger, a.where())
	return nil
}

// Stop ends background work and waits for it: the cluster leaves first
// (so the others forward here no more), then the internal listener
// answers what it took, then the firms and the webhook engine stop and
// write what they hold, all before Cleanup closes the stores.
func (a *App) Stop() error {
	if a.metrics != nil {
		a.metrics.retire(a)
	}
	if a.cancel != nil {
		a.cancel()
		a.wg.Wait()
	}
	if err := a.internal.stop(); err != nil {
		a.logger.Warn("internal listener stopped before what it took was answered", zap.Error(err))
	}
	if a.firms != nil {
		a.firms.Stop()
	}
	return a.dispatch.stop()
}

// Cleanup releases what Provision acquired.
func (a *App) Cleanup() error {
	if a.registry != nil {
		if err := a.registry.Close(); err != nil {
			a.logger.Warn("closing credential registry", zap.Error(err))
		}
	}
	if a.stores != nil {
		a.stores.close()
	}
	return nil
}

// roles are the roles a firm's systems play.
var roles = []string{"records", "ledger", "documents"}

// sets reports whether the firm's Caddyfile block names its system in
// role.
func (f *Firm) sets(role string) bool {
	switch role {
	case "records":
		return f.RecordsRaw != nil
	case "ledger":
		return f.LedgerRaw != nil
	case "documents":
		return f.DocumentsRaw != nil
	}
	return false
}

// Interface guards
var (
	_ api.App               = (*App)(nil)
	_ console.App           = (*App)(nil)
	_ admin.App             = (*App)(nil)
	_ auth.RegistryProvider = (*App)(nil)
	_ health.Checker        = (*App)(nil)
	_ ratelimit.Host        = (*App)(nil)
	_ caddy.App             = (*App)(nil)
	_ caddy.Provisioner     = (*App)(nil)
	_ caddy.Validator       = (*App)(nil)
	_ caddy.CleanerUpper    = (*App)(nil)
)
