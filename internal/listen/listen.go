// Package listen turns PRACTICEGW_LISTEN into what a Caddyfile needs to
// bind the API's socket to it.
//
// A Caddyfile site address such as http://127.0.0.1:8080 does not bind to
// 127.0.0.1: Caddy listens on every interface and serves only requests
// whose Host header is 127.0.0.1. Binding takes the bind directive, with
// the host alone, and a site address with the port alone; Caddyfiles
// cannot split a variable, so practicegw splits it before any command
// reads a Caddyfile and the Caddyfiles say
//
//	http://:{$PRACTICEGW_LISTEN_PORT:8080} {
//		bind "{$PRACTICEGW_LISTEN_HOST}"
//		...
//	}
package listen

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

const (
	// Var is the address the API listens on: host:port, :port or port.
	Var = "PRACTICEGW_LISTEN"
	// Default is Var's value when it is unset or empty: every interface,
	// port 8080.
	Default = ":8080"
	// HostVar and PortVar are what Export derives from Var for the
	// Caddyfiles. A deployment sets Var, never these.
	HostVar = "PRACTICEGW_LISTEN_HOST"
	PortVar = "PRACTICEGW_LISTEN_PORT"
)

// Split reads a listen address and returns the bind directive's address
// and the site address's port. The bind address is empty for every
// interface (":8080", "8080"); an unspecified address keeps to its family,
// which Go's dual-stack sockets otherwise would not ("0.0.0.0:8080" is
// IPv4 only, "[::]:8080" IPv6 only); anything else is the host as given,
// an IP address or a name bound to its first address.
func Split(addr string) (bind, port string, err error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		addr = Default
	}
	host := ""
	port = addr
	if strings.Contains(addr, ":") {
		if host, port, err = net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("%s %q: want host:port, :port or port: %w", Var, addr, err)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("%s %q: port %q is not a number from 1 to 65535", Var, addr, port)
	}
	if strings.ContainsAny(host, "/ \t") {
		return "", "", fmt.Errorf("%s %q: host %q is not an IP address or a host name", Var, addr, host)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		if ip.Is4() {
			return "tcp4/" + host, port, nil
		}
		return "tcp6/" + host, port, nil
	}
	return host, port, nil
}

// Export sets HostVar and PortVar from Var in this process's environment,
// always, so that they cannot disagree with Var.
func Export() error {
	bind, port, err := Split(os.Getenv(Var))
	if err != nil {
		return err
	}
	if err := os.Setenv(HostVar, bind); err != nil {
		return err
	}
	return os.Setenv(PortVar, port)
}
