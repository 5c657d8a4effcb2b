package redis

import (
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// NewClient connects to the Redis at url (redis://host:port/db, or
// rediss:// for TLS). ioTimeout bounds each read and write on a
// connection, so that a Redis that stops answering fails calls instead of
// holding them: the gateway, whose requests wait on Redis, uses a short
// one; a dispatcher, whose scripts move batches, a longer one. The caller
// closes the client.
func NewClient(url string, ioTimeout time.Duration) (*goredis.Client, error) {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis %q: %w", url, err)
	}
	opts.DialTimeout = max(time.Second, ioTimeout)
	opts.ReadTimeout = ioTimeout
	opts.WriteTimeout = ioTimeout
	return goredis.NewClient(opts), nil
}
