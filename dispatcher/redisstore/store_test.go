package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/redisstore"
	"github.com/practicegw/practicegw/dispatcher/storetest"
	"github.com/practicegw/practicegw/internal/redistest"
)

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T) dispatcher.Backends {
		return open(t, srv).Backends()
	})
}

// open connects to srv and empties it, so each test starts clean.
func open(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
