// Package gateway is the practicegw Caddy app: the firms the gateway
// serves, the backends behind each, and the store every practicegw handler
// shares (the embedded database, the credential registry, idempotency
// keys). Handlers find it with ctx.App("practicegw").
package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/caddymodule/console"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/dispatcher/kafka"

	"github.com/practicegw/practicegw/caddymodule/api"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/envconfig"
	"github.com/practicegw/practicegw/internal/publishedkeys"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
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

	firms        map[string]*firmBackends
	demoBackends *firmBackends
	shared       *shared
	poolKey      string
	store        gatewayStore
	redis        *redisClient
	registry     *auth.Registry
	cursorKey    []byte
	dispatch     *dispatch
	limiter      *limiterRef
	logger       *zap.Logger

	metrics       prometheus.Registerer
	budget        upstream.Budget
	upstreamState changes.StateStore
	notices       notifications.Inbox
	changes       changes.ChangeSink

	// holder names this app in the read model's sync leases.
	holder string
	// readStore keeps firms' read models; readFeed, when several
	// instances share it, orders their updates.
	readStore readStore
	readFeed  readmodel.UpdateFeed
	// syncMetrics exports the syncs' status; the app that starts last
	// is the one it reads.
	syncMetrics *syncCollector
	// cluster places this instance's share of the firms' read models,
	// nil when every instance holds every firm (no bound, or no Redis).
	cluster        *cluster.Cluster
	rmMetrics      *readModelCollector
	clusterMetrics *cluster.Metrics

	// connector connects firms' own systems (nil without a connect
	// block).
	connector *connect.Manager
	// connections are the firms' connections in the store, which every
	// instance follows (connections.go); caddyCtx loads their systems.
	connections connectionStore
	caddyCtx    caddy.Context
	follow      *connFollow
	// connTick, when set, paces the follow loop instead of a ticker
	// every followEvery; clock, when set, is the time (tests).
	connTick <-chan time.Time
	clock    func() time.Time
	// letters are each firm's letters, shared by the copies of its
	// systems, Caddyfile's and connections' alike (readmodel.go).
	letters *sync.Map // firm -> *practice.Letters

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
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "practicegw",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision opens the shared store and builds each firm's backends.
func (a *App) Provision(ctx caddy.Context) error {
	if err := a.provisionRuntime(ctx); err != nil {
		return err
	}
	repl := caddy.NewReplacer()
	if err := a.expandSettings(repl); err != nil {
		return err
	}
	if err := a.provisionConnectApps(ctx); err != nil {
		return err
	}
	ids, err := a.firmIDs()
	if err != nil {
		return err
	}
	secrets, err := a.openSharedState(repl, ids)
	if err != nil {
		return err
	}
	if err := a.openStateStore(ctx, secrets); err != nil {
		return err
	}
	keys, err := a.keyring(ctx, repl)
	if err != nil {
		return err
	}
	a.registry = auth.NewRegistry(a.store, keys, auth.RegistryConfig{Logger: a.logger.Named("credentials")})

	d := a.shared.demo
	a.demoBackends = &firmBackends{records: d, clients: d, jobs: d, documents: d, ledger: d, demo: allDemo}
	if err := a.provisionDispatch(); err != nil {
		return fmt.Errorf("practicegw: %w", err)
	}
	a.provisionVendorState()
	a.openReadStore()
	if err := a.provisionPlacement(); err != nil {
		return err
	}
	a.provisionConnections(ctx)
	if err := a.provisionFirms(ctx); err != nil {
		return err
	}
	a.provisionConnector()
	return nil
}

// provisionConnections readies the following of the firms' connections,
// when the store keeps them.
func (a *App) provisionConnections(ctx caddy.Context) {
	a.caddyCtx = ctx
	a.follow = newConnFollow()
	if cs, ok := a.store.(connectionStore); ok {
		a.connections = cs
	}
}

// provisionRuntime sets up what every later step reports to or counts
// with, and reads the settings the environment overrides.
func (a *App) provisionRuntime(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.limiter = &limiterRef{}
	a.holder = holderID()
	a.wg = new(sync.WaitGroup)
	a.letters = new(sync.Map)
	a.metrics = ctx.GetMetricsRegistry()
	var err error
	if a.syncMetrics, err = registerSyncCollector(a.metrics); err != nil {
		return fmt.Errorf("practicegw: sync metrics: %w", err)
	}
	if a.rmMetrics, err = registerReadModelCollector(a.metrics); err != nil {
		return fmt.Errorf("practicegw: read model metrics: %w", err)
	}
	if a.clusterMetrics, err = cluster.RegisterMetrics(a.metrics); err != nil {
		return fmt.Errorf("practicegw: read model metrics: %w", err)
	}
	if err := a.applyEnvironment(os.LookupEnv); err != nil {
		return fmt.Errorf("practicegw: %w", err)
	}
	return nil
}

// expandSettings expands placeholders ({env.X}) in the settings that name
// where the gateway's store is kept.
func (a *App) expandSettings(repl *caddy.Replacer) error {
	if a.DataDir = expand(repl, a.DataDir); a.DataDir == "" {
		return fmt.Errorf("practicegw: data_dir expands to nothing")
	}
	a.Redis = expand(repl, a.Redis)
	a.RedisTLS = expandTLS(repl, a.RedisTLS)
	a.RateLimit = expand(repl, a.RateLimit)
	return nil
}

// provisionConnectApps loads the connect block's vendor apps, each its
// vendor's module: their secrets are read, and their endpoints defaulted,
// before anything serves a consent.
func (a *App) provisionConnectApps(ctx caddy.Context) error {
	if a.Connect == nil {
		return nil
	}
	if err := a.Connect.Provision(ctx); err != nil {
		return fmt.Errorf("practicegw: %w", err)
	}
	if err := a.Connect.Validate(); err != nil {
		return fmt.Errorf("practicegw: %w", err)
	}
	return nil
}

// firmIDs returns the configured firms' ids, refusing a config without
// firms or with an id that is not a firm's.
func (a *App) firmIDs() ([]string, error) {
	if len(a.Firms) == 0 {
		return nil, fmt.Errorf("practicegw: configure at least one firm")
	}
	ids := make([]string, 0, len(a.Firms))
	for i, f := range a.Firms {
		if !strings.HasPrefix(f.ID, "frm_") || len(f.ID) < 5 {
			return nil, fmt.Errorf("practicegw: firm %d: id %q must look like frm_<name>", i, f.ID)
		}
		ids = append(ids, f.ID)
	}
	return ids, nil
}

// openSharedState opens (or, on a reload, takes over) the store kept per
// data directory and returns the configured secrets key, nil when none is.
func (a *App) openSharedState(repl *caddy.Replacer, ids []string) (*sealed.Key, error) {
	dir, err := filepath.Abs(a.DataDir)
	if err != nil {
		return nil, fmt.Errorf("practicegw: data_dir: %w", err)
	}
	secrets, err := a.configuredSecretsKey(repl)
	if err != nil {
		return nil, fmt.Errorf("practicegw: %w", err)
	}
	if secrets == nil && a.Redis != "" {
		return nil, fmt.Errorf("practicegw: with redis, configure secrets_key (or PRACTICEGW_SECRETS_KEY): " +
			"every gateway and dispatcher seals and opens webhook endpoint secrets with the same key; generate it with openssl rand -base64 32")
	}
	// One database and one set of demo records per data directory, shared
	// by the configs a reload overlaps: a firm added by the new config is
	// added to them.
	a.poolKey = dir
	val, reloaded, err := pool.LoadOrNew(a.poolKey, func() (caddy.Destructor, error) {
		return openShared(dir, ids, secrets)
	})
	if err != nil {
		return nil, fmt.Errorf("practicegw: %w", err)
	}
	a.shared = val.(*shared)
	if secrets != nil && secrets.ID() != a.shared.secrets.ID() {
		return nil, fmt.Errorf("practicegw: the secrets key differs from the one practicegw started with: restart it to change keys")
	}
	if !reloaded {
		a.logGeneratedKey()
	}
	if err := a.shared.demo.AddFirms(ids); err != nil {
		return nil, fmt.Errorf("practicegw: %w", err)
	}
	return secrets, nil
}

// logGeneratedKey says where the stored secrets' key is when none is
// configured, once per process start rather than on every reload.
func (a *App) logGeneratedKey() {
	switch {
	case a.shared.generated:
		a.logger.Warn("no secrets key configured: generated one to seal the stored secrets; keep it with the database, "+
			"and in production configure secrets_key (PRACTICEGW_SECRETS_KEY) instead", zap.String("file", a.shared.keyFile))
	case a.shared.keyFile != "":
		a.logger.Info("no secrets key configured: stored secrets are sealed under the generated key in a file",
			zap.String("file", a.shared.keyFile))
	}
}

// openStateStore chooses where credentials, endpoints and idempotency
// records are kept: the shared bbolt database, or Redis when configured so
// that every instance sees the same.
func (a *App) openStateStore(ctx context.Context, secrets *sealed.Key) error {
	a.store = a.shared.store
	if a.Redis == "" {
		return nil
	}
	var err error
	if a.redis, err = openRedis(a.Redis, a.RedisTLS); err != nil {
		return fmt.Errorf("practicegw: %w", err)
	}
	store, err := redisstore.New(a.redis.client, redisstore.Options{Secrets: secrets})
	if err != nil {
		return fmt.Errorf("practicegw: %w", err)
	}
	if err := store.PrepareSecrets(ctx); err != nil {
		return fmt.Errorf("practicegw: secrets_key: %w", err)
	}
	if err := store.ReadModel().DropRetiredTombstones(ctx); err != nil {
		// Keys nothing reads: the next start tries again.
		a.logger.Warn("retired tombstone keys not dropped", zap.Error(err))
	}
	a.store = store
	return nil
}

// provisionVendorState chooses where the vendor adapters keep their
// allowances, sync state and seen notifications.
func (a *App) provisionVendorState() {
	a.changes = changeSink{app: a}
	a.budget, a.upstreamState, a.notices = upstream.NewLocalBudget(nil), a.shared.store, a.shared.store
	if a.redis != nil {
		// Vendors' published limits hold across every gateway instance,
		// and a vendor notification replayed to any of them is caught.
		a.budget = redisstore.NewBudget(a.redis.client, "pgw:budget:")
		a.upstreamState = a.store.(changes.StateStore)
		a.notices = a.store.(notifications.Inbox)
	}
}

// provisionFirms opens each configured firm's systems.
func (a *App) provisionFirms(ctx caddy.Context) error {
	a.firms = map[string]*firmBackends{}
	for i := range a.Firms {
		f := &a.Firms[i]
		b, err := a.backends(ctx, f)
		if err != nil {
			return fmt.Errorf("practicegw: firm %s: %w", f.ID, err)
		}
		a.firms[f.ID] = b
	}
	return nil
}

// applyEnvironment fills the fields the configuration leaves out from the
// environment's table, as the Caddyfile adapter already did for a
// Caddyfile: a JSON configuration gets the same defaults.
func (a *App) applyEnvironment(lookup envconfig.Lookup) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if raw, err = envconfig.Apply(raw, lookup); err != nil {
		return err
	}
	return json.Unmarshal(raw, a)
}

// LimiterSettings are what a practicegw_ratelimit handler that names no
// ceiling or Redis of its own takes: the app's, so that rate limits live
// where the rest of the shared store does.
func (a *App) LimiterSettings() ratelimit.AppSettings {
	return ratelimit.AppSettings{Rate: a.RateLimit, Redis: a.Redis, RedisTLS: a.RedisTLS}
}

func (a *App) keyring(ctx context.Context, repl *caddy.Replacer) (*auth.Keyring, error) {
	var keys []credential.SigningKey
	for _, k := range a.SigningKeys {
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(repl.ReplaceAll(k.Secret, "")))
		if err != nil {
			return nil, fmt.Errorf("practicegw: signing key %q: secret is not base64: %w", k.ID, err)
		}
		if err := publishedkeys.Check(secret); err != nil {
			return nil, fmt.Errorf("practicegw: signing key %q: %w", k.ID, err)
		}
		keys = append(keys, credential.SigningKey{ID: k.ID, Secret: secret})
	}
	if len(keys) == 0 {
		k, err := a.store.SigningKey(ctx)
		if err != nil {
			return nil, fmt.Errorf("practicegw: generated signing key: %w", err)
		}
		keys = append(keys, k)
	}
	ring, err := auth.NewKeyring(keys...)
	if err != nil {
		return nil, fmt.Errorf("practicegw: %w", err)
	}
	// Cursors are sealed under a key of their own, derived from the key
	// that signs credentials, which every instance shares.
	mac := hmac.New(sha256.New, keys[0].Secret)
	mac.Write([]byte("practicegw cursor key v1"))
	a.cursorKey = mac.Sum(nil)
	return ring, nil
}

// CursorKey seals the API's paging cursors, the same on every instance.
func (a *App) CursorKey() []byte { return a.cursorKey }

// Validate checks what Provision does not need in order to run: that
// firms and signing keys are named once each, and that deprecations and
// timeouts make sense.
func (a *App) Validate() error {
	seen := map[string]bool{}
	for _, f := range a.Firms {
		if seen[f.ID] {
			return fmt.Errorf("practicegw: firm %s is configured twice", f.ID)
		}
		seen[f.ID] = true
		for _, role := range f.Demo {
			if !slices.Contains(roles, role) {
				return fmt.Errorf("practicegw: firm %s: demo role %q is none of %s", f.ID, role, strings.Join(roles, ", "))
			}
			if f.sets(role) {
				return fmt.Errorf("practicegw: firm %s: %s is set to demo records and to a system", f.ID, role)
			}
		}
	}
	keys := map[string]bool{}
	for i, k := range a.SigningKeys {
		if k.ID == "" || k.Secret == "" {
			return fmt.Errorf("practicegw: signing key %d needs an id and a secret", i)
		}
		if keys[k.ID] {
			return fmt.Errorf("practicegw: signing key %q is configured twice", k.ID)
		}
		keys[k.ID] = true
	}
	for _, d := range a.Deprecated {
		if !d.Sunset.After(d.Since) {
			return fmt.Errorf("practicegw: deprecated %s %s: sunset %s is not after %s", d.Method, d.Path,
				d.Sunset.Format(time.DateOnly), d.Since.Format(time.DateOnly))
		}
	}
	if a.Webhooks.Timeout < 0 {
		return fmt.Errorf("practicegw: webhooks timeout %s is negative", time.Duration(a.Webhooks.Timeout))
	}
	return nil
}

// Start runs the app's background work.
func (a *App) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.expire(ctx)
	}()
	a.dispatch.start(a.shared.demo, a.logger)
	a.runSyncs(ctx)
	if a.cluster != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.cluster.Run(ctx)
		}()
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		tick := a.connTick
		if tick == nil {
			t := time.NewTicker(followEvery)
			defer t.Stop()
			tick = t.C
		}
		a.followConnections(ctx, tick)
	}()
	if a.connector != nil {
		// Karbon's webhook subscriptions, checked every hour.
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.connector.Run(ctx)
		}()
	}
	a.syncMetrics.serve(a)
	a.rmMetrics.serve(a)
	a.clusterMetrics.Serve(a, a.cluster)
	a.sayWhereThingsAre()
	return nil
}

// Stop ends background work and waits for it.
func (a *App) Stop() error {
	if a.syncMetrics != nil {
		a.syncMetrics.retire(a)
	}
	if a.rmMetrics != nil {
		a.rmMetrics.retire(a)
	}
	if a.clusterMetrics != nil {
		a.clusterMetrics.Retire(a)
	}
	if a.cancel != nil {
		a.cancel()
		a.wg.Wait()
	}
	a.closeConnections()
	for _, b := range a.firms {
		if b.model != nil {
			// A follower's background catch-up with the shared feed.
			b.model.Close()
		}
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
	if a.redis != nil {
		a.redis.release()
	}
	if a.shared != nil {
		if _, err := pool.Delete(a.poolKey); err != nil {
			return err
		}
	}
	return nil
}

// demoIdle is how long a firm's demo records (live or sandbox) stay in
// memory unused; they are loaded again when next used.
const demoIdle = 10 * time.Minute

// expire drops idempotency keys, vendor notifications handled, consents
// past their expiry and hourly usage past their retention
// from the embedded store (Redis expires its own), and the demo records
// unused for demoIdle from memory.
func (a *App) expire(ctx context.Context) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		if a.redis == nil {
			if _, err := a.shared.store.ExpireIdempotency(ctx); err != nil {
				a.logger.Warn("expiring idempotency keys", zap.Error(err))
			}
			if _, err := a.shared.store.ExpireNotifications(ctx); err != nil {
				a.logger.Warn("expiring vendor notifications handled", zap.Error(err))
			}
			if _, err := a.shared.store.ExpireAuthorizations(ctx); err != nil {
				a.logger.Warn("expiring consents nobody came back for", zap.Error(err))
			}
		}
		if _, err := a.shared.store.ExpireUsage(ctx); err != nil {
			a.logger.Warn("expiring usage counters", zap.Error(err))
		}
		a.sweepTombstones(ctx, time.Now())
		if n := a.shared.demo.Unload(time.Now().Add(-demoIdle)); n > 0 {
			a.logger.Debug("demo records unused for a while dropped from memory", zap.Int("sets", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Credentials implements auth.RegistryProvider.
func (a *App) Credentials() *auth.Registry { return a.registry }

// Systems returns the systems serving a tenant: the firm's configured
// systems for live records, the seeded demo records for its sandbox.
func (a *App) Systems(t practice.Tenant) (api.Systems, bool) {
	b, ok := a.firms[t.Firm]
	if !ok {
		return nil, false
	}
	if t.Sandbox {
		return a.demoBackends, true
	}
	return b, ok
}

// Idempotency returns the store of idempotency keys.
func (a *App) Idempotency() api.IdempotencyStore { return a.store }

// Deprecations are the routes the configuration marks for retirement.
func (a *App) Deprecations() []api.Deprecation { return a.Deprecated }

// gatewayStore is where the gateway keeps what its instances share: the
// embedded store for one instance, Redis for several.
type gatewayStore interface {
	auth.Store
	api.IdempotencyStore
	SigningKey(ctx context.Context) (credential.SigningKey, error)
	// Backends is the webhook pipeline's state, in the same backend.
	Backends() dispatcher.Backends
}

type firmBackends struct {
	records, documents, ledger practice.Reader
	clients                    practice.ClientWriter
	jobs                       practice.JobWriter

	// upstreams are the firm's real systems, for readiness and ingest.
	upstreams []upstreamSystem
	// keeps are the roles whose Caddyfile system keeps proposals;
	// engagements is the role whose system keeps the firm's engagements
	// as its Caddyfile systems say (firmsystem.EngagementsRole: none when
	// none does), which its reads follow until its connections are
	// followed (connSet.engagements).
	keeps       map[string]bool
	engagements string
	// model is the read model of the firm's real systems, which serves
	// the kinds they own; syncs keep it current, one per system.
	model *readmodel.Model
	syncs []*readmodel.Syncer

	// conns are the firm's connections open here, replaced whole while
	// requests read it.
	conns atomic.Pointer[connSet]
	// demo are the roles served by the demo records when no connection
	// serves them (Firm.Demo; every role for sandbox credentials).
	demo map[string]bool

	// placed says that the cluster places the firm: its models (its
	// connections' too) are loaded and synced only where it is held;
	// elsewhere a read answered here (no holder took it) comes from the
	// shared store and says so. held is set while this instance holds
	// it, under follow.mu; holding runs its Caddyfile syncs meanwhile.
	placed  bool
	held    atomic.Bool
	holding *holding
}

// allDemo serves every role by the demo records.
var allDemo = map[string]bool{"records": true, "ledger": true, "documents": true}

// Reader is what serves k: the firm's Caddyfile system, else its
// connection of k's role (or why none serves it), else the demo records
// where the firm's block sets the role to demo, else nothing: the firm
// has no system connected in that role. The engagements of a firm none
// of whose systems keeps proposals are its records' answer of none.
func (b *firmBackends) Reader(k practice.Kind) practice.Reader {
	if k == practice.Engagements && b.engagementsFrom() == firmsystem.EngagementsNone {
		return noEngagements(b.Reader(practice.Clients))
	}
	if b.model != nil && b.model.Owns(k) {
		if b.placed && !b.held.Load() {
			return storeServed{b.model}
		}
		return b.model
	}
	conns := b.conns.Load()
	if r := conns.reader(k); r != nil {
		if m, ok := r.(*readmodel.Model); ok && b.placed && !b.held.Load() {
			return storeServed{m}
		}
		return r
	}
	if role := conns.role(k); !b.demo[role] {
		return notConnected(role)
	}
	switch k {
	case practice.Documents:
		return b.documents
	case practice.Invoices:
		return b.ledger
	default:
		return b.records
	}
}

// engagementsFrom is the role whose system keeps the firm's engagements,
// or none: as its Caddyfile systems say, else as its connections and
// they say, once followed.
func (b *firmBackends) engagementsFrom() string {
	if b.model != nil && b.model.Owns(practice.Engagements) {
		return b.engagements
	}
	if c := b.conns.Load(); c != nil {
		return c.engagements
	}
	return b.engagements
}

// noEngagements answers the engagements of a firm none of whose systems
// keeps them, from records, the reader of its records: a real system's
// copy answers none, as fresh as the copy (firmsystem.NoEngagements);
// the demo records answer theirs, as they always have; a records system
// that does not serve says why.
func noEngagements(records practice.Reader) practice.Reader {
	switch records.(type) {
	case *readmodel.Model, storeServed:
		return firmsystem.NoEngagements{Reader: records}
	}
	return records
}

// Clients and Jobs take writes: the Caddyfile's records system, else the
// records connection's, else the demo records where the firm's block
// sets them.
func (b *firmBackends) Clients() practice.ClientWriter {
	if b.model != nil && b.model.Owns(practice.Clients) {
		return b.clients
	}
	if w := b.conns.Load().clients(); w != nil {
		return w
	}
	if !b.demo["records"] {
		return notConnected("records")
	}
	return b.clients
}

func (b *firmBackends) Jobs() practice.JobWriter {
	if b.model != nil && b.model.Owns(practice.Jobs) {
		return b.jobs
	}
	if w := b.conns.Load().jobs(); w != nil {
		return w
	}
	if !b.demo["records"] {
		return notConnected("records")
	}
	return b.jobs
}

// Firm names a firm the gateway serves, for the console.
func (a *App) Firm(id string) (console.Firm, bool) {
	for _, f := range a.Firms {
		if f.ID == id {
			name := f.Name
			if name == "" {
				name = f.ID
			}
			return console.Firm{ID: f.ID, Name: name}, true
		}
	}
	return console.Firm{}, false
}

// Interface guards
var (
	_ api.App            = (*App)(nil)
	_ console.App        = (*App)(nil)
	_ ratelimit.Host     = (*App)(nil)
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ cluster.Firms      = (*App)(nil)
)
