package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// Help introduces practicegw, lists its own commands before Caddy's and
// offers nothing that would replace the binary with a stock Caddy.
func TestRootHelp(t *testing.T) {
	root := Root()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	if !strings.HasPrefix(help, "practicegw ") {
		t.Errorf("help starts %q, want practicegw's introduction", help[:min(60, len(help))])
	}
	own, caddys := strings.Index(help, "practicegw's commands:"), strings.Index(help, "Caddy's commands")
	if own < 0 || caddys < own {
		t.Fatalf("help lists practicegw's commands at %d and Caddy's at %d, want practicegw's first:\n%s", own, caddys, help)
	}
	for _, name := range []string{"credential", "connect", "sync", "listen", "trigger"} {
		if i := strings.Index(help, "\n  "+name+" "); i < own || i > caddys {
			t.Errorf("%s is not among practicegw's commands in:\n%s", name, help)
		}
	}
	for _, name := range []string{"run", "start", "stop", "reload", "adapt", "validate", "fmt", "list-modules", "environ", "version"} {
		if i := strings.Index(help, "\n  "+name+" "); i < caddys {
			t.Errorf("%s is not among the server's commands in:\n%s", name, help)
		}
	}
	for _, name := range withheld[:3] {
		if strings.Contains(help, "\n  "+name+" ") {
			t.Errorf("help offers %s", name)
		}
		if c, _, err := root.Find([]string{name}); err == nil && c != root {
			t.Errorf("practicegw %s is a command", name)
		}
	}
}

// Every usage line, however deep, names practicegw.
func TestUsageLinesSayPracticegw(t *testing.T) {
	var walk func(*cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		n++
		if line := c.UseLine(); !strings.HasPrefix(line, "practicegw") {
			t.Errorf("usage line %q", line)
		}
		if strings.Contains(c.Long, "caddy run") || strings.Contains(c.Long, "caddy adapt") {
			t.Errorf("%s's help names the caddy binary", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(Root())
	if n < 25 {
		t.Fatalf("walked %d commands; practicegw has more", n)
	}
}

// (A test binary carries no module information: e2e checks Caddy's
// version in the real binary.)
func TestVersionNamesPracticegwAndCaddy(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		root := Root()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "practicegw ") || !strings.HasPrefix(lines[1], "Caddy ") {
			t.Errorf("%v prints %q, want practicegw's version then Caddy's", args, out.String())
		}
	}
	version = "v1.4.0"
	defer func() { version = "" }()
	if got := versionText(); !strings.HasPrefix(got, "practicegw v1.4.0 ") {
		t.Errorf("with -ldflags' version, prints %q", got)
	}
}

// Caddy's commands report their exit status through an error of its own
// type; practicegw exits with it.
func TestExitCodeOfCaddysCommands(t *testing.T) {
	run := caddycmd.WrapCommandFuncForCobra(func(caddycmd.Flags) (int, error) {
		return caddy.ExitCodeFailedQuit, errors.New("quitting failed")
	})
	if got := exitCode(run(&cobra.Command{}, nil)); got != caddy.ExitCodeFailedQuit {
		t.Errorf("exit code %d, want Caddy's %d", got, caddy.ExitCodeFailedQuit)
	}
	if got := exitCode(errors.New("--firm is required")); got != 1 {
		t.Errorf("a plain error exits %d, want 1", got)
	}
}

// A command that finds no gateway says where it looked and how to point
// it elsewhere; a refusal is the gateway's own sentence, not the admin
// endpoint's JSON.
func TestAdminErrorsAreForAPerson(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, err = runCommand(t, listCommand(), "--firm", "frm_acme", "--admin", closed)
	if err == nil {
		t.Fatal("credential list against no gateway succeeded")
	}
	for _, want := range []string{closed, "--admin", "PRACTICEGW_ADMIN", "practicegw run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "dial tcp") {
		t.Errorf("%q speaks of the dialer", err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": `unknown firm "frm_nope" <check the firm block>`})
	}))
	defer srv.Close()
	_, err = runCommand(t, listCommand(), "--firm", "frm_nope", "--admin", strings.TrimPrefix(srv.URL, "http://"))
	if err == nil || err.Error() != `unknown firm "frm_nope" <check the firm block>` {
		t.Errorf("a refusal reads %v", err)
	}
}
