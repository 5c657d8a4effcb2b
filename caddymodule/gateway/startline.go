package gateway

import (
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// whereThingsAre is what the start line tells someone who has just run
// the gateway: where the API, the console and the admin endpoint are,
// where state is kept, and how to get a first credential.
type whereThingsAre struct {
	API, Console, Admin, State, FirstCredential string
}

// sayWhereThingsAre logs the start line: one line, at info, that a
// newcomer can act on.
func sayWhereThingsAre(logger *zap.Logger, w whereThingsAre) {
	logger.Info("practicegw is serving",
		zap.String("api", w.API),
		zap.String("console", w.Console),
		zap.String("admin", w.Admin),
		zap.String("state", w.State),
		zap.String("first_credential", w.FirstCredential))
}

func (a *App) where() whereThingsAre {
	base := httpBase(a.ctx)
	admin := adminListen(a.ctx)
	w := whereThingsAre{API: base + "/v1", Console: base + "/console", Admin: admin}
	if base == "" {
		w.API, w.Console = "no HTTP server configured", "no HTTP server configured"
	}
	if a.Redis != "" {
		// The URL may carry a password: the line names the variable.
		w.State = "Redis (redis, default PRACTICEGW_REDIS)"
	} else if dir, err := filepath.Abs(a.DataDir); err == nil {
		w.State = dir
	} else {
		w.State = a.DataDir
	}
	firm := "frm_…"
	if len(a.Firms) > 0 {
		firm = a.Firms[0].ID
	}
	cmd := "practicegw credential issue --firm " + firm + " --name first --scopes admin,clients:read,jobs:read"
	switch admin {
	case "off":
		cmd = "none: the admin endpoint is off, and the CLI issues credentials through it"
	case caddy.DefaultAdminListen:
	default:
		cmd += " --admin " + admin
	}
	w.FirstCredential = cmd
	return w
}

// httpBase is the base URL of the HTTP app's first server (by name) that
// listens somewhere: http, or https when it serves TLS, on localhost when
// it listens on every interface.
func httpBase(ctx caddy.Context) string {
	if ctx.Context == nil {
		return ""
	}
	app, err := ctx.AppIfConfigured("http")
	if err != nil {
		return ""
	}
	httpApp, ok := app.(*caddyhttp.App)
	if !ok {
		return ""
	}
	names := make([]string, 0, len(httpApp.Servers))
	for name := range httpApp.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		srv := httpApp.Servers[name]
		for _, listen := range srv.Listen {
			addr, err := caddy.ParseNetworkAddress(listen)
			if err != nil || addr.IsUnixNetwork() || addr.IsFdNetwork() {
				continue
			}
			host := addr.Host
			if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
				host = "localhost"
			}
			scheme := "http"
			if len(srv.TLSConnPolicies) > 0 && int(addr.StartPort) != httpApp.HTTPPort {
				scheme = "https"
			}
			port := addr.StartPort
			if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) {
				return scheme + "://" + host
			}
			return scheme + "://" + net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
		}
	}
	return ""
}

// adminListen is the admin endpoint's address in the running
// configuration ("off" when it is disabled). Caddy keeps the
// configuration in an unexported field of its Context and offers no
// accessor, so it is read by reflection; the start line's test fails if
// Caddy moves it, and the address falls back to Caddy's default.
func adminListen(ctx caddy.Context) string {
	v := reflect.ValueOf(ctx).FieldByName("cfg")
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() {
		return caddy.DefaultAdminListen
	}
	admin := v.Elem().FieldByName("Admin")
	if !admin.IsValid() || admin.Kind() != reflect.Pointer || admin.IsNil() {
		return caddy.DefaultAdminListen
	}
	if d := admin.Elem().FieldByName("Disabled"); d.IsValid() && d.Kind() == reflect.Bool && d.Bool() {
		return "off"
	}
	if l := admin.Elem().FieldByName("Listen"); l.IsValid() && l.Kind() == reflect.String && l.String() != "" {
		return strings.TrimPrefix(l.String(), "tcp/")
	}
	return caddy.DefaultAdminListen
}
