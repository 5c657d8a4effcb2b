package gateway

import (
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/practice/readmodel"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// The stores import no Caddy module, so the interfaces the handlers
// declare for them are checked here, where the wiring hands the stores
// to the handlers.
var (
	_ auth.Store             = (*boltstore.Store)(nil)
	_ auth.Store             = (*redisstore.Store)(nil)
	_ auth.RevocationFeed    = (*redisstore.Store)(nil)
	_ upstream.Locks         = (*boltstore.ReadModel)(nil)
	_ upstream.Locks         = (*redisstore.ReadModel)(nil)
	_ connect.Connections    = (*boltstore.Store)(nil)
	_ connect.Connections    = (*redisstore.Store)(nil)
	_ connect.Authorizations = (*boltstore.Store)(nil)
	_ connect.Authorizations = (*redisstore.Store)(nil)
	_ readmodel.Purger       = (*boltstore.ReadModel)(nil)
	_ readmodel.Purger       = (*redisstore.ReadModel)(nil)
	_ cluster.Nonces         = (*boltstore.Store)(nil)
	_ cluster.Nonces         = (*redisstore.Store)(nil)
	_ cluster.Credentials    = (*auth.Registry)(nil)
)
