package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/sealed"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// DispatcherRedis is the Redis a standalone dispatcher shares with the
// gateways; its Open is what kafka.Config opens the shared delivery state
// with. The dispatcher package declares what it needs of the store
// (kafka.Shared); the gateway, which opens every store, opens this one.
type DispatcherRedis struct {
	// URL is redis://host:port/db, or rediss:// for TLS
	// (PRACTICEGW_REDIS).
	URL string
	// TLS are the files a rediss:// connection is made with
	// (PRACTICEGW_REDIS_TLS_*).
	TLS redisstore.TLSFiles
	// Secrets is the key the gateways seal webhook endpoint secrets with
	// (PRACTICEGW_SECRETS_KEY).
	Secrets *sealed.Key
}

// Open connects to the Redis and fails unless it answers within 5s.
func (r DispatcherRedis) Open(ctx context.Context) (kafka.Shared, error) {
	rdb, err := redisstore.NewClient(r.URL, r.TLS, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("PRACTICEGW_REDIS: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", rdb.Options().Addr, err)
	}
	return &dispatcherStore{rdb: rdb, secrets: r.Secrets}, nil
}

// dispatcherStore is a dispatcher's connection to the shared Redis.
type dispatcherStore struct {
	rdb     *redis.Client
	secrets *sealed.Key
}

// Backends opens the store over the connection, checks the secrets key
// against the one the gateways sealed under and seals what an earlier
// version left in plain text, as every gateway does at start.
func (s *dispatcherStore) Backends(ctx context.Context) (dispatcher.Backends, error) {
	store, err := redisstore.New(s.rdb, redisstore.Options{Secrets: s.secrets})
	if err != nil {
		return dispatcher.Backends{}, err
	}
	if err := store.PrepareSecrets(ctx); err != nil {
		return dispatcher.Backends{}, fmt.Errorf("PRACTICEGW_SECRETS_KEY: %w", err)
	}
	return store.Backends(), nil
}

func (s *dispatcherStore) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

func (s *dispatcherStore) Close() error { return s.rdb.Close() }
