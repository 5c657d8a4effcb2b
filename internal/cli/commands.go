// Package cli adds practicegw's own subcommands to the binary:
// credential management, sandbox triggers and the sync of firms' real
// systems, which talk to a running gateway through its admin endpoint.
package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
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
// the JSON answer into out.
func adminCall(cmd *cobra.Command, method, path string, in, out any) error {
	var body io.Reader
	headers := http.Header{}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
		headers.Set("Content-Type", "application/json")
	}
	resp, err := caddycmd.AdminAPIRequest(adminAddr(cmd), method, path, headers, body)
	if err != nil {
		return fmt.Errorf("talking to the gateway at %s: %w", adminAddr(cmd), err)
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading the gateway's answer: %w", err)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
