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

	"github.com/practicegw/practicegw/internal/envconfig"
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
// always, so that they cannot disagree with Var. Var comes from the
// environment or, when unset there, from the first --envfile among args
// that sets it, as Caddy will read those files after Export has run.
func Export(args []string) error {
	addr, ok := os.LookupEnv(Var)
	if !ok {
		var err error
		if addr, err = fromEnvFiles(args); err != nil {
			return err
		}
	}
	bind, port, err := Split(addr)
	if err != nil {
		return err
	}
	if err := os.Setenv(HostVar, bind); err != nil {
		return err
	}
	return os.Setenv(PortVar, port)
}

// fromEnvFiles is Var as the first of args' --envfile files that sets it
// has it ("" when none does), read as Caddy reads those files: KEY=VALUE
// lines, an optional "export ", # comments, quotes around the value.
func fromEnvFiles(args []string) (string, error) {
	for i, a := range args {
		var file string
		switch {
		case (a == "--envfile" || a == "-envfile") && i+1 < len(args):
			file = args[i+1]
		case strings.HasPrefix(a, "--envfile="), strings.HasPrefix(a, "-envfile="):
			_, file, _ = strings.Cut(a, "=")
		default:
			continue
		}
		vars, err := envconfig.ReadFile(file)
		if err != nil {
			return "", err
		}
		if v, ok := vars[Var]; ok {
			return v, nil
		}
	}
	return "", nil
}

// URL is the base URL a client on this machine reaches the API at when
// it listens on addr (PRACTICEGW_LISTEN's value): localhost when it
// listens on every interface, else its host.
func URL(addr string) (string, error) {
	bind, port, err := Split(addr)
	if err != nil {
		return "", err
	}
	host := bind
	if _, h, ok := strings.Cut(bind, "/"); ok {
		host = h
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}
