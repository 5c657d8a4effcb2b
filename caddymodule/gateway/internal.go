package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/internal/occupant"
)

// internalListener is where the other instances forward the requests of
// the firms this one holds: an address of its own (read_model listen),
// never the public site's, over TLS with the cluster's own authority when
// internal_tls is set. It serves the API's answer to forwarded requests
// alone (api.Forwarded).
type internalListener struct {
	addr string
	tls  *tls.Config
	srv  *cluster.Internal
}

// internalListenerOf reads read_model's listen, advertise and
// internal_tls: the listener, and the TLS this instance reaches the
// others with (nil for plain HTTP on a private network).
func internalListenerOf(repl *caddy.Replacer, c ReadModelConfig) (*internalListener, *tls.Config, error) {
	c.Listen = expand(repl, c.Listen)
	t := cluster.InternalTLS{CA: expand(repl, c.InternalTLS.CA), Cert: expand(repl, c.InternalTLS.Cert),
		Key: expand(repl, c.InternalTLS.Key), ServerName: expand(repl, c.InternalTLS.ServerName)}
	u, err := url.Parse(c.Advertise)
	if c.Advertise == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" {
		return nil, nil, fmt.Errorf("read_model advertise %q: with a memory bound, name the URL other instances reach this one's "+
			"internal listener at, with its port, such as http://10.1.2.3:8090 (PRACTICEGW_ADVERTISE)", c.Advertise)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return nil, nil, fmt.Errorf("read_model listen %q: with a memory bound, name the internal listener's address, such as "+
			"10.1.2.3:8090 or :8090, an address of its own on a private network, never the public site's (PRACTICEGW_INTERNAL_LISTEN)", c.Listen)
	}
	l := &internalListener{addr: c.Listen}
	if !t.Set() {
		if u.Scheme == "https" {
			return nil, nil, fmt.Errorf("read_model advertise %s is https: configure internal_tls (PRACTICEGW_INTERNAL_TLS_CA, _CERT, _KEY)", c.Advertise)
		}
		return l, nil, nil
	}
	if u.Scheme != "https" {
		return nil, nil, fmt.Errorf("read_model advertise %s: with internal_tls, advertise https://", c.Advertise)
	}
	server, client, err := t.Configs()
	if err != nil {
		return nil, nil, fmt.Errorf("read_model %w", err)
	}
	l.tls = server
	return l, client, nil
}

// start listens (through Caddy's listeners, which a reload of the same
// process shares) and serves the API's answer to forwarded requests.
func (l *internalListener) start(ctx caddy.Context) error {
	h, err := api.Forwarded(ctx)
	if err != nil {
		return fmt.Errorf("internal listener: %w", err)
	}
	na, err := caddy.ParseNetworkAddress(l.addr)
	if err != nil {
		return fmt.Errorf("read_model listen %s: %w", l.addr, err)
	}
	ln, err := na.Listen(ctx, 0, net.ListenConfig{})
	if err != nil {
		return fmt.Errorf("read_model listen %s: %w", l.addr, err)
	}
	l.srv = cluster.ServeInternal(ln.(net.Listener), l.tls, h, ctx.Logger().Named("internal"))
	return nil
}

// stop lets the forwarded requests being answered finish, then closes.
func (l *internalListener) stop() error {
	if l == nil || l.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.srv.Close(ctx)
}

// refuseOccupied refuses to start beside another process that already
// answers on one of this gateway's addresses: its sites', its internal
// listener's, or its admin endpoint's (which Caddy bound already, so it is
// found among this process's listeners). Caddy binds with SO_REUSEPORT,
// which would let both listen and the kernel split the connections; a
// reload of this same process is never refused (its sockets are its own).
func refuseOccupied(ctx caddy.Context, internal *internalListener) error {
	addrs, err := siteAddresses(ctx)
	if err != nil {
		return err
	}
	if internal != nil {
		for _, site := range addrs {
			if samePort(site, internal.addr) {
				return fmt.Errorf("read_model listen %s is a site's address too (%s): the internal listener needs an address of its own", internal.addr, site)
			}
		}
		addrs = append(addrs, internal.addr)
	}
	for _, addr := range addrs {
		by, err := occupant.Listening(addr)
		if err != nil {
			continue // an address we cannot read: Caddy says what it can
		}
		if len(by) > 0 {
			return fmt.Errorf("%s is already answered by %s: another gateway runs there? Stop it, or give this one "+
				"other addresses (PRACTICEGW_LISTEN, PRACTICEGW_ADMIN, PRACTICEGW_INTERNAL_LISTEN)", addr, occupant.Describe(by))
		}
	}
	conflicts, _ := occupant.Beside()
	if len(conflicts) > 0 {
		c := conflicts[0]
		return fmt.Errorf("%s, where this gateway listens (its admin endpoint, or a site), is answered by %s too: "+
			"another gateway runs there? Stop it, or give this one other addresses (PRACTICEGW_ADMIN, PRACTICEGW_LISTEN)",
			c.Addr, occupant.Describe(c.By))
	}
	return nil
}

// siteAddresses are the TCP addresses the HTTP app's servers listen on.
func siteAddresses(ctx caddy.Context) ([]string, error) {
	app, err := ctx.AppIfConfigured("http")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	httpApp, ok := app.(*caddyhttp.App)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, srv := range httpApp.Servers {
		for _, l := range srv.Listen {
			na, err := caddy.ParseNetworkAddress(l)
			if err != nil || !strings.HasPrefix(na.Network, "tcp") {
				continue
			}
			for p := na.StartPort; p <= na.EndPort; p++ {
				out = append(out, net.JoinHostPort(na.Host, fmt.Sprint(p)))
			}
		}
	}
	return out, nil
}

// samePort reports whether two listen addresses would take each other's
// connections: the same port, on the same host or either on every one.
func samePort(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	every := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return every(ha) || every(hb) || ha == hb
}
