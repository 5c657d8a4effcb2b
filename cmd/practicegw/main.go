// Command practicegw is Caddy built with the practicegw modules.
package main

import (
	"fmt"
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// The firm systems, each a guest module of the practicegw app.
	_ "github.com/practicegw/practicegw/adapters/dropbox"
	_ "github.com/practicegw/practicegw/adapters/google_drive"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	_ "github.com/practicegw/practicegw/adapters/sharepoint"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/adapters/xpm"

	_ "github.com/practicegw/practicegw/caddymodule/api"
	_ "github.com/practicegw/practicegw/caddymodule/auth"
	_ "github.com/practicegw/practicegw/caddymodule/console"
	_ "github.com/practicegw/practicegw/caddymodule/gateway"
	_ "github.com/practicegw/practicegw/caddymodule/health"
	_ "github.com/practicegw/practicegw/caddymodule/ingest"
	_ "github.com/practicegw/practicegw/caddymodule/ratelimit"
	_ "github.com/practicegw/practicegw/internal/cli"
	"github.com/practicegw/practicegw/internal/listen"
)

func main() {
	// Before any command reads a Caddyfile: the Caddyfiles bind the API's
	// socket to PRACTICEGW_LISTEN's host through variables derived from it.
	if err := listen.Export(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "practicegw:", err)
		os.Exit(1)
	}
	caddycmd.Main()
}
