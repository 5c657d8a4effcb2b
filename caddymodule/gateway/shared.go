package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/demo"
	"github.com/practicegw/practicegw/internal/groupcommit"
	"github.com/practicegw/practicegw/internal/sealed"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// pool keeps the embedded database open across config reloads: bbolt
// locks its file, so a reloaded app must reuse the handle rather than open
// it again.
var pool = caddy.NewUsagePool()

type shared struct {
	db    *bolt.DB
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening %s (is another practicegw using it?): %w", path, err)
	}
	sh := &shared{db: db, secrets: secrets}
	if secrets == nil {
		sh.keyFile = filepath.Join(dir, secretsKeyFile)
		if sh.secrets, sh.generated, err = keyFile(dir); err != nil {
			db.Close()
			return nil, fmt.Errorf("secrets key: %w", err)
		}
	}
	// One group committer for every writer of the file: a demo record's
	// write, its change's event and the event's deliveries share a commit.
	commits := groupcommit.New(db)
	if sh.store, err = boltstore.New(db, nil, boltstore.WithSecrets(sh.secrets),
		boltstore.WithCommitter(commits), boltstore.ReclaimLeases()); err != nil {
		db.Close()
		return nil, sh.explain(err)
	}
	if sh.demo, err = demo.Open(db, firms, demo.WithCommitter(commits)); err != nil {
		db.Close()
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
	kept := filepath.Join(filepath.Dir(s.db.Path()), secretsKeyFile)
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

func (s *shared) Destruct() error { return s.db.Close() }

// redisPool shares one Redis client per URL and TLS files across config
// reloads.
var redisPool = caddy.NewUsagePool()

type redisClient struct {
	key    string
	client *redis.Client
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
