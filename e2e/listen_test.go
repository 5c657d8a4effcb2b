package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestListenAddress starts the gateway with PRACTICEGW_LISTEN in each of
// its forms: a host binds the socket to that address alone, no host binds
// every interface, and either way a request is served whatever its Host
// header says. Linux routes all of 127.0.0.0/8 to loopback, so 127.0.0.2
// is another local address of every test machine.
func TestListenAddress(t *testing.T) {
	for _, c := range []struct {
		name   string
		listen func(port string) string
		others bool // reachable through another local address
	}{
		{"host and port", func(p string) string { return "127.0.0.1:" + p }, false},
		{"port alone", func(p string) string { return ":" + p }, true},
		{"bare port", func(p string) string { return p }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := freeLoopbackPort(t)
			g := startGateway(t, gatewayOptions{
				addr: "127.0.0.1:" + port,
				env:  []string{"PRACTICEGW_LISTEN=" + c.listen(port)},
			})

			req, err := http.NewRequest("GET", "http://"+g.addr+"/v1/openapi.json", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "gateway.example.com"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"openapi"`) {
				t.Errorf("Host: gateway.example.com answered %d %.100q, want the OpenAPI document", resp.StatusCode, body)
			}

			other := "127.0.0.2:" + port
			err = dial(other)
			switch {
			case c.others && err != nil:
				t.Errorf("PRACTICEGW_LISTEN=%s: %s refused (%v); want every interface", c.listen(port), other, err)
			case !c.others && err == nil:
				t.Errorf("PRACTICEGW_LISTEN=%s: %s accepted a connection; want the socket bound to 127.0.0.1 alone", c.listen(port), other)
			}
			// Where the machine has IPv6, a wildcard socket takes it too.
			if v6 := "[::1]:" + port; !c.others && dial(v6) == nil {
				t.Errorf("PRACTICEGW_LISTEN=%s: %s accepted a connection; want the socket bound to 127.0.0.1 alone", c.listen(port), v6)
			}
		})
	}
}

// An address practicegw cannot bind to stops it before it reads a
// Caddyfile, with the variable named.
func TestListenAddressRefused(t *testing.T) {
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:http", ":70000", "unix//run/practicegw.sock"} {
		cmd := exec.Command(binary, "adapt", "--config", defaultCaddyfile(), "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "PRACTICEGW_LISTEN="+bad)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "PRACTICEGW_LISTEN") {
			t.Errorf("PRACTICEGW_LISTEN=%s: %v, %q; want a refusal naming the variable", bad, err, out)
		}
	}
}

func dial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		conn.Close()
	}
	return err
}

func freeLoopbackPort(t *testing.T) string {
	_, port, err := net.SplitHostPort(freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}
