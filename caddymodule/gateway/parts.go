package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/firms"
	"github.com/practicegw/practicegw/internal/envconfig"
	"github.com/practicegw/practicegw/internal/publishedkeys"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
)

// SyncConfig is how often the read model of firms' real systems is
// brought up to date.
type SyncConfig struct {
	// Poll is the interval of incremental polling and of reading the
	// document stores' change feeds. Default 1m (PRACTICEGW_SYNC_POLL).
	Poll caddy.Duration `json:"poll,omitempty"`
	// Reconcile is the interval of the full comparison that finds
	// deletions. Default 24h (PRACTICEGW_SYNC_RECONCILE).
	Reconcile caddy.Duration `json:"reconcile,omitempty"`
}

// ReadModelConfig bounds the memory the read models take on each
// instance. Without a bound (the default), or without Redis, every
// instance holds every firm's records, as one instance alone must.
type ReadModelConfig struct {
	// Memory is the most this instance's read models may take ("512MiB",
	// "4GiB"), counted as readmodel.Model.Size counts them: records,
	// their indexes and tombstones. Set, with Redis, each firm is held
	// by Replicas of the live instances (PRACTICEGW_READ_MODEL_MEMORY).
	Memory string `json:"memory,omitempty"`
	// Replicas is how many instances hold each firm. Default 2
	// (PRACTICEGW_READ_MODEL_REPLICAS).
	Replicas int `json:"replicas,omitempty"`
	// Advertise is the URL the other instances reach this one's internal
	// listener at, which they send the requests of the firms it holds to;
	// required with a bound (PRACTICEGW_ADVERTISE).
	Advertise string `json:"advertise,omitempty"`
	// Listen is the internal listener's address (host:port), on the port
	// Advertise names: it serves the requests other instances forward and
	// nothing else, and the public site never serves them; required with
	// a bound (PRACTICEGW_INTERNAL_LISTEN). Keep it on a private network,
	// or give it InternalTLS, or both.
	Listen string `json:"listen,omitempty"`
	// InternalTLS makes the internal listener, and this instance's
	// connections to the others', TLS with a certificate of the cluster's
	// own authority at both ends (PRACTICEGW_INTERNAL_TLS_CA, _CERT, _KEY,
	// _SERVER_NAME); Advertise is then https.
	InternalTLS cluster.InternalTLS `json:"internal_tls,omitzero"`
}

// applyEnvironment fills the fields the configuration leaves out from the
// environment's table, as the Caddyfile adapter already did for a
// Caddyfile: a JSON configuration gets the same defaults.
func applyEnvironment(a *App, lookup envconfig.Lookup) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if raw, err = envconfig.Apply(raw, lookup); err != nil {
		return err
	}
	return json.Unmarshal(raw, a)
}

// storeSettings expands the placeholders ({env.X}) of the settings that
// name where the gateway's store is kept, and checks the firms' ids.
func (a *App) storeSettings(repl *caddy.Replacer) (storeSettings, error) {
	var s storeSettings
	if a.DataDir = expand(repl, a.DataDir); a.DataDir == "" {
		return s, fmt.Errorf("data_dir expands to nothing")
	}
	a.Redis = expand(repl, a.Redis)
	a.RedisTLS = expandTLS(repl, a.RedisTLS)
	a.RateLimit = expand(repl, a.RateLimit)
	if len(a.Firms) == 0 {
		return s, fmt.Errorf("configure at least one firm")
	}
	for i, f := range a.Firms {
		if !strings.HasPrefix(f.ID, "frm_") || len(f.ID) < 5 {
			return s, fmt.Errorf("firm %d: id %q must look like frm_<name>", i, f.ID)
		}
		s.firms = append(s.firms, f.ID)
	}
	dir, err := filepath.Abs(a.DataDir)
	if err != nil {
		return s, fmt.Errorf("data_dir: %w", err)
	}
	s.dir, s.redis, s.redisTLS, s.check = dir, a.Redis, a.RedisTLS, a.CheckOnly
	s.secrets, err = configuredSecretsKey(repl, a.SecretsKey)
	return s, err
}

// secretsKeyFile is where a gateway alone keeps the secrets key it
// generated, beside its database but not in it.
const secretsKeyFile = "secrets.key"

// configuredSecretsKey is the key secrets_key names (its default,
// PRACTICEGW_SECRETS_KEY's placeholder, is filled in from the
// environment's table), or nil when it names none. A secrets_key that is
// configured but expands to nothing (a missing file, an unset variable) is
// an error, not a reason to fall back.
func configuredSecretsKey(repl *caddy.Replacer, configured string) (*sealed.Key, error) {
	value := strings.TrimSpace(repl.ReplaceAll(configured, ""))
	if configured != "" && value == "" {
		return nil, fmt.Errorf("secrets_key %s expands to nothing", configured)
	}
	if value == "" {
		return nil, nil
	}
	k, err := sealed.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("secrets_key: %w", err)
	}
	return k, nil
}

// provisionConnectApps loads the connect block's vendor apps, each its
// vendor's module: their secrets are read, and their endpoints defaulted,
// before anything serves a consent.
func provisionConnectApps(ctx caddy.Context, c *connect.Config) error {
	if c == nil {
		return nil
	}
	if err := c.Provision(ctx); err != nil {
		return err
	}
	return c.Validate()
}

// keyring is the credential signing keys (the configured ones, else the
// one generated in the store) and the key paging cursors are sealed
// under, derived from the key that signs credentials, which every
// instance shares.
func keyring(ctx context.Context, repl *caddy.Replacer, configured []SigningKeyConfig, store gatewayStore) (*auth.Keyring, []byte, error) {
	var keys []credential.SigningKey
	for _, k := range configured {
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(repl.ReplaceAll(k.Secret, "")))
		if err != nil {
			return nil, nil, fmt.Errorf("signing key %q: secret is not base64: %w", k.ID, err)
		}
		if err := publishedkeys.Check(secret); err != nil {
			return nil, nil, fmt.Errorf("signing key %q: %w", k.ID, err)
		}
		keys = append(keys, credential.SigningKey{ID: k.ID, Secret: secret})
	}
	if len(keys) == 0 {
		k, err := store.SigningKey(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("generated signing key: %w", err)
		}
		keys = append(keys, k)
	}
	ring, err := auth.NewKeyring(keys...)
	if err != nil {
		return nil, nil, err
	}
	mac := hmac.New(sha256.New, keys[0].Secret)
	mac.Write([]byte("practicegw cursor key v1"))
	return ring, mac.Sum(nil), nil
}

// provisionParts builds the firms' runtime over the stores, the cluster
// that places its firms when instances share them, and the connections
// manager, which asks the runtime to purge what a connection left.
func (a *App) provisionParts(ctx caddy.Context, repl *caddy.Replacer) error {
	holder := holderID()
	placement, err := a.placement(repl, holder)
	if err != nil {
		return err
	}
	sync := readmodel.SyncConfig{Poll: time.Duration(a.Sync.Poll), Reconcile: time.Duration(a.Sync.Reconcile)}
	if sync.Poll < 0 || sync.Reconcile < 0 {
		return fmt.Errorf("sync: poll %s and reconcile %s must be positive", sync.Poll, sync.Reconcile)
	}
	cfg := firms.Config{Sync: sync, Holder: holder, Placed: placement != nil, Connects: a.Connect != nil}
	if a.Connect != nil {
		cfg.PublicURL = a.Connect.PublicURL
	}
	for i := range a.Firms {
		f, err := loadFirm(ctx, &a.Firms[i])
		if err != nil {
			return fmt.Errorf("firm %s: %w", a.Firms[i].ID, err)
		}
		cfg.Firms = append(cfg.Firms, f)
	}
	st := a.stores
	a.firms, err = firms.New(ctx, cfg, firms.Deps{Logger: a.logger, Metrics: ctx.GetMetricsRegistry(),
		Store: st.read, Feed: st.feed, State: st.state, Notices: st.notices, Budget: st.budget,
		Changes: a.dispatch.sink(), Demo: st.shared.demo, Connections: st.connections(),
		Connected: connect.Modules{Config: a.Connect, Context: ctx, Secrets: st.state}, Wakes: st.wakes()})
	if err != nil {
		return err
	}
	if placement != nil {
		a.cluster = cluster.New(*placement, st.membership(), a.firms, a.logger.Named("placement"))
	}
	if conns := st.connections(); a.Connect != nil && conns != nil {
		a.connector = connect.New(a.Connect, connect.Deps{Connections: conns, Authorizations: conns, Firms: a.firms, Runtime: a.firms, Stages: a.firms,
			Upstream: upstream.Deps{Logger: a.logger.Named("connect"), Budget: st.budget,
				// Tokens, Karbon access keys and webhook signing keys: the
				// upstream state store, sealed by both backends.
				State: st.state,
				// One instance at a time steps a connection, and checks
				// Karbon's subscriptions.
				Locks: st.read}})
	}
	return nil
}

// connectStore is what the connect Manager keeps in the gateway's store:
// both backends provide it (stores.go).
type connectStore interface {
	connect.Connections
	connect.Authorizations
	firms.Connections
}

// loadFirm loads the systems a firm's Caddyfile block names as guest
// modules, records first: a ledger or document store may name its
// clients through them.
func loadFirm(ctx caddy.Context, f *Firm) (firms.Firm, error) {
	out := firms.Firm{ID: f.ID, Name: f.Name, Demo: f.Demo, Engagements: f.Engagements, LinkClients: f.LinkClients}
	for _, role := range []struct{ name, field string }{{"records", "RecordsRaw"}, {"ledger", "LedgerRaw"}, {"documents", "DocumentsRaw"}} {
		if !f.sets(role.name) {
			continue
		}
		val, err := ctx.LoadModule(f, role.field)
		if err != nil {
			return out, fmt.Errorf("%s: %w", role.name, err)
		}
		mod, ok := val.(firmsystem.Module)
		if !ok {
			return out, fmt.Errorf("%s: module %T is not a firm system", role.name, val)
		}
		out.Systems = append(out.Systems, firms.System{Role: role.name, Module: mod})
	}
	return out, nil
}

// placement reads the read_model block: with Redis and a bound, this
// instance holds a share of the firms, placed by the cluster; nil when it
// holds every firm.
func (a *App) placement(repl *caddy.Replacer, holder string) (*cluster.Config, error) {
	c := a.ReadModel
	c.Memory, c.Advertise = expand(repl, c.Memory), expand(repl, c.Advertise)
	if c.Memory == "" {
		return nil, nil
	}
	bound, err := envconfig.ParseSize(c.Memory)
	if err != nil {
		return nil, fmt.Errorf("read_model memory: %w", err)
	}
	if c.Replicas < 0 {
		return nil, fmt.Errorf("read_model replicas %d must be positive", c.Replicas)
	}
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	if a.stores.membership() == nil {
		a.logger.Info("read_model memory applies with redis alone: this instance holds every firm")
		return nil, nil
	}
	internal, client, err := internalListenerOf(repl, c)
	if err != nil {
		return nil, err
	}
	a.internal = internal
	nonces, _ := a.stores.gateway.(cluster.Nonces)
	return &cluster.Config{ID: holder, Advertise: c.Advertise, Memory: bound, Replicas: c.Replicas,
		ForwardKey: a.stores.shared.secrets.Derive("forwarded requests v1"), Nonces: nonces, Credentials: a.registry,
		TLS: client}, nil
}

// holderID names this process in sync leases and the membership: the
// host and a random part, so that two processes on one host, or an app
// and the one a reload replaces, are told apart.
func holderID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "/" + hex.EncodeToString(b)
}

// metrics are the parts' collectors, which the app that starts last
// serves.
type metrics struct {
	firms   *firms.Metrics
	cluster *cluster.Metrics
}

func registerMetrics(reg prometheus.Registerer) (*metrics, error) {
	f, err := firms.RegisterMetrics(reg)
	if err != nil {
		return nil, err
	}
	c, err := cluster.RegisterMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("read model metrics: %w", err)
	}
	return &metrics{firms: f, cluster: c}, nil
}

func (m *metrics) serve(a *App) {
	m.firms.Serve(a.firms)
	m.cluster.Serve(a, a.cluster)
}

func (m *metrics) retire(a *App) {
	m.firms.Retire(a.firms)
	m.cluster.Retire(a)
}
