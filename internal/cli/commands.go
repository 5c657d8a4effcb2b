// Package cli adds practicegw's own subcommands to the binary:
// credential management, sandbox triggers and the sync of firms' real
// systems, which talk to a running gateway through its admin endpoint.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/internal/envconfig"
)

// adminAddr is the admin endpoint the CLI talks to: --admin, else
// PRACTICEGW_ADMIN or its default, from the environment's table.
func adminAddr(cmd *cobra.Command) string {
	if v, _ := cmd.Flags().GetString("admin"); v != "" {
		return v
	}
	return envconfig.AdminAddress(os.LookupEnv)
}

func addAdminFlag(cmd *cobra.Command) {
	cmd.Flags().String("admin", "", "admin endpoint of the running gateway (default $PRACTICEGW_ADMIN or localhost:2019)")
}

// adminCall sends one request to the gateway's admin endpoint and decodes
// the JSON answer into out. Its errors are for the person at the
// terminal: a gateway that is not there names the address tried and how
// to point elsewhere, and a refusal is the gateway's own sentence.
func adminCall(cmd *cobra.Command, method, path string, in, out any) error {
	addr := adminAddr(cmd)
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	network, err := caddy.ParseNetworkAddress(addr)
	if err != nil || network.PortRangeSize() != 1 {
		return fmt.Errorf("the admin address %q is not one: give --admin or PRACTICEGW_ADMIN as host:port, such as localhost:2019", addr)
	}
	origin := "http://" + network.JoinHostPort(0)
	if network.IsUnixNetwork() {
		// Caddy's admin endpoint on a socket takes this host alone.
		origin = "http://127.0.0.1"
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, origin+path, body)
	if err != nil {
		return err
	}
	if !network.IsUnixNetwork() {
		// Caddy's admin endpoint checks the origin of each request.
		req.Header.Set("Origin", origin)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network.Network, network.JoinHostPort(0))
		},
	}}
	resp, err := client.Do(req)
	if err != nil {
		return unreachable(addr)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return adminRefusal(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("the admin endpoint at %s answered %s with something other than the gateway's JSON: is it a practicegw gateway?", addr, path)
	}
	return nil
}

// unreachable says that no gateway answered at addr, and how to point the
// command at one.
func unreachable(addr string) error {
	return fmt.Errorf("no gateway answers at %s (its admin endpoint): start one with `practicegw run`, "+
		"or point this command at yours with --admin host:port or PRACTICEGW_ADMIN", addr)
}

// adminRefusal is the sentence of the admin endpoint's error body
// ({"error": "..."}), else its status.
func adminRefusal(resp *http.Response) error {
	var answer struct {
		Error string `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &answer) == nil && answer.Error != "" {
		return errors.New(answer.Error)
	}
	return fmt.Errorf("the gateway refused the request (%s)", resp.Status)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
