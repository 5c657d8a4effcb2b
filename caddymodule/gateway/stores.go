package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/demo"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/firms"
	"github.com/practicegw/practicegw/internal/groupcommit"
	"github.com/practicegw/practicegw/internal/occupant"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/credential"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// gatewayStore is where the gateway keeps what its instances share: the
// embedded store for one instance, Redis for several.
type gatewayStore interface {
	auth.Store
	api.IdempotencyStore
	SigningKey(ctx context.Context) (credential.SigningKey, error)
	// Backends is the webhook pipeline's state, in the same backend.
	Backends() dispatcher.Backends
}

// stores are the stores of one app: the embedded file (always: it holds
// the demo records, and everything when there is no Redis) and Redis when
// configured, and what each part of the gateway keeps where.
type stores struct {
	shared  *shared
	poolKey string
	// checkDir is the temporary directory of the stores that stand in
	// for the configured ones while a configuration is only checked.
	checkDir string
	redis    *redisClient
	// gateway is the gateway's store: bbolt's, or Redis's.
	gateway gatewayStore
	// read keeps the firms' read models; feed, when several instances
	// share it, orders their updates.
	read firms.Store
	feed readmodel.UpdateFeed
	// state is the upstream state, notices the vendor notifications
	// handled, budget the vendors' allowances.
	state   changes.StateStore
	notices notifications.Inbox
	budget  upstream.Budget
}

// storeSettings are where the stores are, placeholders expanded.
type storeSettings struct {
	dir      string
	redis    string
	redisTLS redisstore.TLSFiles
	secrets  *sealed.Key
	firms    []string
	// check is a configuration only checked (check_only): its stores
	// are not opened.
	check bool
}

// openStores opens (or, on a reload, takes over) the embedded file of
// dir, and Redis when configured so that every instance sees the same.
func openStores(ctx context.Context, s storeSettings, logger *zap.Logger) (*stores, error) {
	if s.secrets == nil && s.redis != "" {
		return nil, fmt.Errorf("with redis, configure secrets_key (or PRACTICEGW_SECRETS_KEY): " +
			"every gateway and dispatcher seals and opens webhook endpoint secrets with the same key; generate it with openssl rand -base64 32")
	}
	if s.check {
		return checkStores(ctx, s, logger)
	}
	// One database and one set of demo records per data directory, shared
	// by the configs a reload overlaps: a firm added by the new config is
	// added to them.
	val, reloaded, err := pool.LoadOrNew(s.dir, func() (caddy.Destructor, error) {
		return openShared(s.dir, s.firms, s.secrets)
	})
	if err != nil {
		return nil, err
	}
	st := &stores{shared: val.(*shared), poolKey: s.dir}
	if s.secrets != nil && s.secrets.ID() != st.shared.secrets.ID() {
		st.close()
		return nil, fmt.Errorf("the secrets key differs from the one practicegw started with: restart it to change keys")
	}
	if !reloaded {
		st.shared.logGeneratedKey(logger)
	}
	if err := st.shared.demo.AddFirms(s.firms); err != nil {
		st.close()
		return nil, err
	}
	if err := st.openRedis(ctx, s, logger); err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

// openRedis moves the gateway's store to Redis when it is configured, and
// with it the read models, the upstream state, the notifications handled
// and the vendors' budgets, so that every instance shares them.
func (st *stores) openRedis(ctx context.Context, s storeSettings, logger *zap.Logger) error {
	b := st.shared.store
	st.gateway, st.read, st.state, st.notices, st.budget = b, b.ReadModel(), b, b, upstream.NewLocalBudget(nil)
	if s.redis == "" {
		return nil
	}
	var err error
	if st.redis, err = openRedis(s.redis, s.redisTLS); err != nil {
		return err
	}
	store, err := redisstore.New(st.redis.client, redisstore.Options{Secrets: s.secrets})
	if err != nil {
		return err
	}
	if err := store.PrepareSecrets(ctx); err != nil {
		return fmt.Errorf("secrets_key: %w", err)
	}
	if err := store.ReadModel().DropRetiredTombstones(ctx); err != nil {
		// Keys nothing reads: the next start tries again.
		logger.Warn("retired tombstone keys not dropped", zap.Error(err))
	}
	rm := store.ReadModel()
	// Vendors' published limits hold across every gateway instance, and a
	// vendor notification replayed to any of them is caught.
	st.gateway, st.read, st.feed, st.state, st.notices = store, rm, rm, store, store
	st.budget = redisstore.NewBudget(st.redis.client, "pgw:budget:")
	return nil
}

// membership is where the instances' heartbeats are kept: Redis's, nil
// without it (one instance holds every firm).
func (st *stores) membership() cluster.Membership {
	m, _ := st.read.(cluster.Membership)
	if st.redis == nil {
		return nil
	}
	return m
}

// connections are where the firms' connections and the consents awaited
// are kept, in the gateway's store.
func (st *stores) connections() connectStore {
	c, _ := st.gateway.(connectStore)
	return c
}

// wakes carry the syncs' wakes between instances: Redis's channel, none
// for a gateway alone.
func (st *stores) wakes() firms.WakeChannel {
	if w, ok := st.gateway.(firms.WakeChannel); ok && st.redis != nil {
		return w
	}
	return nil
}

// checks are the stores in /readyz: the embedded file, and Redis when
// configured; both critical.
func (st *stores) checks(ctx context.Context) []health.Check {
	checks := []health.Check{{Name: "store", Critical: true, OK: true}}
	if err := st.shared.file.Ping(); err != nil {
		checks[0].OK, checks[0].Detail, checks[0].Err = false, "the embedded store cannot be read", err
	}
	if st.redis != nil {
		c := health.Check{Name: "redis", Critical: true, OK: true}
		if err := st.redis.client.Ping(ctx).Err(); err != nil {
			c.OK, c.Detail, c.Err = false, "Redis does not answer", err
		}
		checks = append(checks, c)
	}
	return checks
}

// demoIdle is how long a firm's demo records (live or sandbox) stay in
// memory unused; they are loaded again when next used.
const demoIdle = 10 * time.Minute

// expire drops idempotency keys, vendor notifications handled, consents
// past their expiry and hourly usage past their retention from the
// embedded store (Redis expires its own), and the demo records unused
// for demoIdle from memory.
func (st *stores) expire(ctx context.Context, logger *zap.Logger) {
	b := st.shared.store
	if st.redis == nil {
		if _, err := b.ExpireIdempotency(ctx); err != nil {
			logger.Warn("expiring idempotency keys", zap.Error(err))
		}
		if _, err := b.ExpireNotifications(ctx); err != nil {
			logger.Warn("expiring vendor notifications handled", zap.Error(err))
		}
		if _, err := b.ExpireAuthorizations(ctx); err != nil {
			logger.Warn("expiring consents nobody came back for", zap.Error(err))
		}
	}
	if _, err := b.ExpireUsage(ctx); err != nil {
		logger.Warn("expiring usage counters", zap.Error(err))
	}
	if n := st.shared.demo.Unload(time.Now().Add(-demoIdle)); n > 0 {
		logger.Debug("demo records unused for a while dropped from memory", zap.Int("sets", n))
	}
}

// retain holds the embedded file open until the func returned is called,
// for a part that writes to it after the app is cleaned up.
func (st *stores) retain() func() {
	if _, _, err := pool.LoadOrNew(st.poolKey, func() (caddy.Destructor, error) {
		return nil, errors.New("the embedded file is closed")
	}); err != nil {
		return func() {}
	}
	var once sync.Once
	return func() { once.Do(func() { _, _ = pool.Delete(st.poolKey) }) }
}

// close lets go of what openStores took.
func (st *stores) close() {
	if st.checkDir != "" {
		_ = st.shared.Destruct()
		_ = os.RemoveAll(st.checkDir)
		return
	}
	if st.redis != nil {
		st.redis.release()
	}
	_, _ = pool.Delete(st.poolKey)
}

// checkStores stand in for the configured stores while a configuration
// is only checked (practicegw validate): an embedded store in a
// temporary directory, removed with them, and no Redis, whose URL and
// TLS files are read but never dialled. So checking the file of a
// running gateway neither waits for the lock it holds nor changes what
// it keeps, and checks what is written: the parts are built over them as
// over the real ones.
func checkStores(ctx context.Context, s storeSettings, logger *zap.Logger) (*stores, error) {
	if s.redis != "" {
		if _, err := redisstore.ClientOptions(s.redis, s.redisTLS); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "practicegw-check-")
	if err != nil {
		return nil, err
	}
	sh, err := openShared(dir, s.firms, s.secrets)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	st := &stores{shared: sh, checkDir: dir}
	if err := st.openRedis(ctx, storeSettings{}, logger); err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

// pool keeps the embedded database open across config reloads: bbolt
// locks its file, so a reloaded app must reuse the handle rather than open
// it again.
var pool = caddy.NewUsagePool()

type shared struct {
	file  *boltstore.File
	store *boltstore.Store
	demo  *demo.Records
	// secrets is the key the store seals under; keyFile names the file it
	// came from when none was configured, and generated says this start
	// created it.
	secrets   *sealed.Key
	keyFile   string
	generated bool
}

// openShared opens the database in dir with its secrets sealed under
// secrets, or when that is nil under the key in dir's key file, which it
// generates the first time.
func openShared(dir string, firms []string, secrets *sealed.Key) (*shared, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	path := filepath.Join(dir, "practicegw.db")
	// bbolt locks the file to one process: a second gateway on the same
	// data directory is refused at once, saying which holds it.
	if by, _ := occupant.Locking(path); len(by) > 0 {
		return nil, fmt.Errorf("the data file %s is held by %s: another gateway runs on this data directory? "+
			"Stop it, or give this one its own (PRACTICEGW_DATA)", path, occupant.Describe(by))
	}
	file, err := boltstore.OpenFile(path, 5*time.Second)
	if err != nil {
		if by, _ := occupant.Locking(path); len(by) > 0 {
			return nil, fmt.Errorf("the data file %s is held by %s: another gateway runs on this data directory? "+
				"Stop it, or give this one its own (PRACTICEGW_DATA)", path, occupant.Describe(by))
		}
		return nil, fmt.Errorf("opening %s (is another practicegw using it?): %w", path, err)
	}
	sh := &shared{file: file, secrets: secrets}
	if secrets == nil {
		sh.keyFile = filepath.Join(dir, secretsKeyFile)
		if sh.secrets, sh.generated, err = sealed.KeyFile(sh.keyFile); err != nil {
			file.Close()
			return nil, fmt.Errorf("secrets key: %w", err)
		}
	}
	// One group committer for every writer of the file: a demo record's
	// write, its change's event and the event's deliveries share a commit.
	commits := groupcommit.New(file.DB)
	if sh.store, err = boltstore.New(file.DB, nil, boltstore.WithSecrets(sh.secrets),
		boltstore.WithCommitter(commits), boltstore.ReclaimLeases()); err != nil {
		file.Close()
		return nil, sh.explain(err)
	}
	if sh.demo, err = demo.Open(file.DB, firms, demo.WithCommitter(commits)); err != nil {
		file.Close()
		return nil, fmt.Errorf("opening demo records: %w", err)
	}
	return sh, nil
}

// explain adds to a store's refusal of the secrets key what the operator
// can do about it.
func (s *shared) explain(err error) error {
	if !errors.Is(err, sealed.ErrWrongKey) {
		return err
	}
	kept := filepath.Join(filepath.Dir(s.file.Path()), secretsKeyFile)
	switch {
	case s.generated:
		// A key made now cannot be the one the store was sealed with:
		// leave no file behind that a later start would take for it.
		os.Remove(s.keyFile)
		return fmt.Errorf("%w (no secrets key is configured and %s was missing: restore it, or configure the key the store was sealed with)", err, s.keyFile)
	case s.keyFile != "":
		return fmt.Errorf("%w (the key in %s)", err, s.keyFile)
	}
	if _, serr := os.Stat(kept); serr == nil {
		return fmt.Errorf("%w (it may be the key generated in %s: configure secrets_key {file.%s})", err, kept, kept)
	}
	return err
}

// logGeneratedKey says where the stored secrets' key is when none is
// configured, once per process start rather than on every reload.
func (s *shared) logGeneratedKey(logger *zap.Logger) {
	switch {
	case s.generated:
		logger.Warn("no secrets key configured: generated one to seal the stored secrets; keep it with the database, "+
			"and in production configure secrets_key (PRACTICEGW_SECRETS_KEY) instead", zap.String("file", s.keyFile))
	case s.keyFile != "":
		logger.Info("no secrets key configured: stored secrets are sealed under the generated key in a file",
			zap.String("file", s.keyFile))
	}
}

func (s *shared) Destruct() error { return s.file.Close() }

// redisPool shares one Redis client per URL and TLS files across config
// reloads.
var redisPool = caddy.NewUsagePool()

type redisClient struct {
	key    string
	client *redisstore.Client
}

func (r *redisClient) Destruct() error { return r.client.Close() }

func (r *redisClient) release() { redisPool.Delete(r.key) }

func openRedis(url string, files redisstore.TLSFiles) (*redisClient, error) {
	key := strings.Join([]string{url, files.CA, files.Cert, files.Key}, "\x00")
	val, _, err := redisPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		client, err := redisstore.NewClient(url, files, 500*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return &redisClient{key: key, client: client}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(*redisClient), nil
}

// The stores import no Caddy module, so the interfaces the handlers and
// the parts declare for them are checked here, where the wiring hands
// the stores to them.
var (
	_ auth.Store             = (*boltstore.Store)(nil)
	_ auth.Store             = (*redisstore.Store)(nil)
	_ auth.RevocationFeed    = (*redisstore.Store)(nil)
	_ upstream.Locks         = (*boltstore.ReadModel)(nil)
	_ upstream.Locks         = (*redisstore.ReadModel)(nil)
	_ connect.Connections    = (*boltstore.Store)(nil)
	_ connect.Connections    = (*redisstore.Store)(nil)
	_ firms.WakeChannel      = (*redisstore.Store)(nil)
	_ connect.Authorizations = (*boltstore.Store)(nil)
	_ connect.Authorizations = (*redisstore.Store)(nil)
	_ firms.Store            = (*boltstore.ReadModel)(nil)
	_ firms.Store            = (*redisstore.ReadModel)(nil)
	_ firms.Connections      = (*boltstore.Store)(nil)
	_ firms.Connections      = (*redisstore.Store)(nil)
	_ readmodel.Purger       = (*boltstore.ReadModel)(nil)
	_ readmodel.Purger       = (*redisstore.ReadModel)(nil)
	_ readmodel.Fencer       = (*boltstore.ReadModel)(nil)
	_ readmodel.Fencer       = (*redisstore.ReadModel)(nil)
	_ cluster.Membership     = (*redisstore.ReadModel)(nil)
	_ cluster.Nonces         = (*boltstore.Store)(nil)
	_ cluster.Nonces         = (*redisstore.Store)(nil)
	_ cluster.Credentials    = (*auth.Registry)(nil)
	_ gatewayStore           = (*boltstore.Store)(nil)
	_ gatewayStore           = (*redisstore.Store)(nil)
)
