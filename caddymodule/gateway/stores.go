package gateway

import (
	"context"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/auth"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/connection"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// The stores import no Caddy module, so the interfaces the handlers
// declare for them are checked here, where the wiring hands the stores
// to the handlers.
var (
	_ auth.Store          = (*boltstore.Store)(nil)
	_ auth.Store          = (*redisstore.Store)(nil)
	_ auth.RevocationFeed = (*redisstore.Store)(nil)
	_ upstream.Locks      = (*boltstore.ReadModel)(nil)
	_ upstream.Locks      = (*redisstore.ReadModel)(nil)
	_ connectStore        = (*boltstore.Store)(nil)
	_ connectStore        = (*redisstore.Store)(nil)
)

// connectStore is what caddymodule/connect asks of a store: its
// Connections and Authorizations interfaces, spelled out here until the
// checks can name them.
type connectStore interface {
	CreateConnection(ctx context.Context, c connection.Connection) (connection.Connection, error)
	Connection(ctx context.Context, id string) (connection.Connection, error)
	Connections(ctx context.Context, firm string) ([]connection.Connection, error)
	UpdateConnection(ctx context.Context, c connection.Connection, version int64) (connection.Connection, error)
	SaveAuthorization(ctx context.Context, a connection.Authorization) error
	TakeAuthorization(ctx context.Context, state string, now time.Time) (connection.Authorization, error)
}
