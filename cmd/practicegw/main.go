// Command practicegw is Caddy built with the practicegw modules, under
// practicegw's own command line (cmd/internal/cli).
package main

import (
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// The firm systems, each a guest module of the practicegw app.
	_ "github.com/practicegw/practicegw/adapters/dropbox"
	_ "github.com/practicegw/practicegw/adapters/google_drive"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	_ "github.com/practicegw/practicegw/adapters/quickbooks"
	_ "github.com/practicegw/practicegw/adapters/sharepoint"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/adapters/xpm"

	_ "github.com/practicegw/practicegw/caddymodule/admin"
	_ "github.com/practicegw/practicegw/caddymodule/api"
	_ "github.com/practicegw/practicegw/caddymodule/auth"
	_ "github.com/practicegw/practicegw/caddymodule/console"
	_ "github.com/practicegw/practicegw/caddymodule/gateway"
	_ "github.com/practicegw/practicegw/caddymodule/health"
	_ "github.com/practicegw/practicegw/caddymodule/ingest"
	_ "github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/cmd/internal/cli"
)

func main() { cli.Main() }
