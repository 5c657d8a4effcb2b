package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/demo"
	boltstore "github.com/practicegw/practicegw/internal/store/bolt"
	redisstore "github.com/practicegw/practicegw/internal/store/redis"
)

// pool keeps the embedded database open across config reloads: bbolt
// locks its file, so a reloaded app must reuse the handle rather than open
// it again.
var pool = caddy.NewUsagePool()

type shared struct {
	db    *bolt.DB
	store *boltstore.Store
	demo  *demo.Records
}

func openShared(dir string, firms []string) (*shared, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	path := filepath.Join(dir, "practicegw.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening %s (is another practicegw using it?): %w", path, err)
	}
	store, err := boltstore.New(db, nil)
	if err != nil {
		db.Close()
		return nil, err
	}
	records, err := demo.Open(db, firms)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening demo records: %w", err)
	}
	return &shared{db: db, store: store, demo: records}, nil
}

func (s *shared) Destruct() error { return s.db.Close() }

// redisPool shares one Redis client per URL across config reloads.
var redisPool = caddy.NewUsagePool()

type redisClient struct {
	url    string
	client *redis.Client
}

func (r *redisClient) Destruct() error { return r.client.Close() }

func (r *redisClient) release() { redisPool.Delete(r.url) }

func openRedis(url string) (*redisClient, error) {
	val, _, err := redisPool.LoadOrNew(url, func() (caddy.Destructor, error) {
		client, err := redisstore.NewClient(url, 500*time.Millisecond)
		if err != nil {
			return nil, err
		}
		return &redisClient{url: url, client: client}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(*redisClient), nil
}
