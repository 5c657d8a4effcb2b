// Package cli adds practicegw's own subcommands to the binary:
// credential management, sandbox triggers and the sync of firms' real
// systems, which talk to a running gateway through its admin endpoint.
package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/internal/envconfig"
)

// adminAddr is the admin endpoint the CLI talks to, and where it was
// named: --admin, else PRACTICEGW_ADMIN or its default, from the
// environment's table.
func adminAddr(cmd *cobra.Command) (addr, from string) {
	if v, _ := cmd.Flags().GetString("admin"); v != "" {
		return v, "--admin"
	}
	if _, ok := os.LookupEnv("PRACTICEGW_ADMIN"); ok {
		return envconfig.AdminAddress(os.LookupEnv), "PRACTICEGW_ADMIN"
	}
	return envconfig.AdminAddress(os.LookupEnv), ""
}

// defaultAdmin is the admin endpoint's address when nothing names one.
func defaultAdmin() string {
	return envconfig.AdminAddress(func(string) (string, bool) { return "", false })
}

func addAdminFlag(cmd *cobra.Command) {
	cmd.Flags().String("admin", "", "the running gateway's admin endpoint, host:port or http://host:port (default $PRACTICEGW_ADMIN or "+defaultAdmin()+")")
}

// admin is a gateway's admin endpoint as the CLI reaches it: over plain
// HTTP on a host and port (Caddy's default, localhost:2019) or a Unix
// socket.
type admin struct {
	addr    string // as it was given
	network caddy.NetworkAddress
}

// parseAdmin reads an admin address given as host:port, http://host:port
// or unix//path; from says where it was given, for the error.
func parseAdmin(addr, from string) (admin, error) {
	bad := func(why string) error {
		where := "the admin address"
		if from != "" {
			where = from
		}
		return fmt.Errorf("%s %q %s: give it as host:port or http://host:port, such as %s", where, addr, why, defaultAdmin())
	}
	a := strings.TrimSpace(addr)
	if strings.HasPrefix(a, "https://") {
		return admin{}, bad("is https, which the admin endpoint does not speak to practicegw's commands")
	}
	if rest, ok := strings.CutPrefix(a, "http://"); ok {
		if a = strings.TrimSuffix(rest, "/"); strings.Contains(a, "/") {
			return admin{}, bad("has a path; the admin endpoint is a whole origin")
		}
	}
	network, err := caddy.ParseNetworkAddress(a)
	if err != nil || network.PortRangeSize() != 1 || !network.IsUnixNetwork() && network.StartPort == 0 {
		return admin{}, bad("is not one address with its port")
	}
	return admin{addr: addr, network: network}, nil
}

// origin is the endpoint's origin, which Caddy checks on each request.
func (a admin) origin() string {
	if a.network.IsUnixNetwork() {
		// Caddy's admin endpoint on a socket takes this host alone.
		return "http://127.0.0.1"
	}
	return "http://" + a.network.JoinHostPort(0)
}

// do sends one request to the endpoint.
func (a admin) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.origin()+path, r)
	if err != nil {
		return nil, err
	}
	if !a.network.IsUnixNetwork() {
		req.Header.Set("Origin", a.origin())
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, a.network.Network, a.network.JoinHostPort(0))
		},
	}}
	return client.Do(req)
}

// adminCall sends one request to the gateway's admin endpoint and decodes
// the JSON answer into out. Its errors are for the person at the
// terminal: a gateway that is not there names the address tried and how
// to point elsewhere, the API's port says it is the API and where the
// admin endpoint is, and a refusal is the gateway's own sentence, in the
// words of the command's flags.
func adminCall(cmd *cobra.Command, method, path string, in, out any) error {
	addr, from := adminAddr(cmd)
	a, err := parseAdmin(addr, from)
	if err != nil {
		return err
	}
	var body []byte
	if in != nil {
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	resp, err := a.do(cmd.Context(), method, path, body)
	if err != nil {
		return unreachable(addr)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return refused(cmd, a, resp)
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

// apiError is the API's error body, which an admin endpoint never
// answers.
type apiError struct {
	Error struct {
		Code string `json:"code"`
	} `json:"error"`
}

// refused says why the endpoint refused a request: the gateway's sentence
// in the command's words, or what answered instead of an admin endpoint.
func refused(cmd *cobra.Command, a admin, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var api apiError
	if resp.Header.Get("Request-Id") != "" || json.Unmarshal(b, &api) == nil && api.Error.Code != "" {
		return notAdmin(cmd.Context(), a)
	}
	var answer adminapi.Refusal
	if json.Unmarshal(b, &answer) != nil || answer.Error == "" {
		return fmt.Errorf("%s answered %s, not as a practicegw gateway's admin endpoint would: is --admin (or PRACTICEGW_ADMIN) the gateway's admin endpoint?", a.addr, resp.Status)
	}
	return errors.New(inFlags(cmd, answer))
}

// notAdmin says that a is the gateway's API, not its admin endpoint, and
// where the admin endpoint answers when it is where it usually is.
func notAdmin(ctx context.Context, a admin) error {
	msg := fmt.Sprintf("%s is the gateway's API, not its admin endpoint, which practicegw's commands talk to", a.addr)
	for _, candidate := range []string{envconfig.AdminAddress(os.LookupEnv), defaultAdmin()} {
		if c, err := parseAdmin(candidate, ""); err == nil && c.network != a.network && c.isAdmin(ctx) {
			return fmt.Errorf("%s: it answers at %s (give --admin %s, or leave --admin out)", msg, candidate, candidate)
		}
	}
	return fmt.Errorf("%s. The admin endpoint is where the Caddyfile's admin option puts it (%s unless PRACTICEGW_ADMIN says otherwise); the gateway names it in the line it logs at start (\"admin\")",
		msg, defaultAdmin())
}

// isAdmin reports whether a practicegw gateway's admin endpoint answers
// at a.
func (a admin) isAdmin(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := a.do(ctx, http.MethodGet, "/practicegw/readiness", nil)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var answer struct {
		Checks json.RawMessage `json:"checks"`
	}
	return resp.StatusCode == http.StatusOK && resp.Header.Get("Request-Id") == "" &&
		json.NewDecoder(resp.Body).Decode(&answer) == nil && answer.Checks != nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// flagOf names the API's parameters as the commands' flags, where the
// flag is not the parameter's name with dashes.
var flagOf = map[string]string{"tenant_id": "tenant", "stage_map": "set"}

// inFlags is the sentence of a refusal, naming the flag the user typed
// for the parameter it refuses, never the parameter or the code.
func inFlags(cmd *cobra.Command, e adminapi.Refusal) string {
	msg := e.Error
	name := cmp.Or(flagOf[e.Param], strings.ReplaceAll(e.Param, "_", "-"))
	f := cmd.Flags().Lookup(name)
	if e.Param == "" || f == nil {
		return msg
	}
	flag := "--" + f.Name
	if e.Code == "parameter_missing" {
		return fmt.Sprintf("%s is required: %s", flag, f.Usage)
	}
	// The API's sentences name its parameters; the command's are flags.
	word := regexp.MustCompile(`\b` + regexp.QuoteMeta(e.Param) + `\b`)
	switch {
	case strings.Contains(e.Param, "_"):
		msg = word.ReplaceAllString(msg, flag)
	case strings.HasPrefix(msg, e.Param+" "):
		msg = flag + strings.TrimPrefix(msg, e.Param)
	}
	if strings.Contains(msg, flag) {
		return msg
	}
	v := f.Value.String()
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		// A repeated flag: the values as typed, not "[a b]".
		v = strings.Join(sv.GetSlice(), " "+flag+" ")
	}
	if v != "" && !secretFlags[f.Name] {
		flag += " " + v
	}
	return flag + ": " + msg
}

// secretFlags are never echoed back.
var secretFlags = map[string]bool{"access-key": true, "token": true}
