package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/adminapi"
)

// execute runs practicegw's whole command tree with args, as Main does.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := Root()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	_, err := root.ExecuteC()
	return out.String(), err
}

// A mistyped command, flag or argument is an error naming what was typed,
// with the nearest there is and where the usage is; a group of
// subcommands given none prints its help.
func TestMistakesAreErrorsWithSuggestions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string // in the error
	}{
		{[]string{"credential", "lst"}, []string{`unknown command "lst" for "practicegw credential"`, "Did you mean this?\n\tlist", "practicegw credential --help"}},
		{[]string{"credential", "lst", "--firm", "frm_acme"}, []string{`unknown command "lst"`, "\tlist"}},
		{[]string{"credential", "--frim", "x"}, []string{"unknown flag --frim"}},
		{[]string{"credential", "list", "--fimr", "frm_acme"}, []string{`unknown flag --fimr for "practicegw credential list"`, "\t--firm", "practicegw credential list --help"}},
		{[]string{"sync", "stats"}, []string{`unknown command "stats"`, "\tstatus"}},
		{[]string{"connect", "lst", "--firm", "frm_hollis"}, []string{`unknown command "lst" for "practicegw connect"`, "\tlist"}},
		{[]string{"credentail"}, []string{`unknown command "credentail" for "practicegw"`, "\tcredential"}},
		{[]string{"credential", "list", "frm_acme"}, []string{"practicegw credential list takes no arguments, only flags", `"frm_acme"`}},
		{[]string{"credential", "revoke"}, []string{"practicegw credential revoke needs the credential's id"}},
		{[]string{"credential", "revoke", "crd_1", "crd_2"}, []string{`"crd_2" is one too many`}},
		{[]string{"credential", "issue", "--firm", "frm_acme"}, []string{"--name and --scopes are required", "practicegw credential issue --help"}},
		{[]string{"credential", "issue", "--firm", "frm_acme", "--name", "x"}, []string{"--scopes is required: comma-separated scopes"}},
		{[]string{"trigger", "--firm", "frm_acme"}, []string{"practicegw trigger needs the kind of event to raise"}},
		{[]string{"connect", "--firm", "frm_hollis", "--role", "ledger"}, []string{"--system is required: the system, one of"}},
	} {
		_, err := execute(t, c.args...)
		if err == nil {
			t.Errorf("practicegw %s succeeded", strings.Join(c.args, " "))
			continue
		}
		if exitCode(err) != 1 {
			t.Errorf("practicegw %s exits %d, want 1", strings.Join(c.args, " "), exitCode(err))
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("practicegw %s: %q does not say %q", strings.Join(c.args, " "), err, w)
			}
		}
	}
	for _, args := range [][]string{{"credential"}, {"credential", "--help"}, {"sync", "-h"}} {
		out, err := execute(t, args...)
		if err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("practicegw %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// --admin takes host:port, a URL or a socket, and names itself when it
// is neither.
func TestAdminAddressForms(t *testing.T) {
	for _, addr := range []string{"localhost:2019", "http://localhost:2019", "http://localhost:2019/", "127.0.0.1:2019", "unix//run/practicegw/admin.sock"} {
		if _, err := parseAdmin(addr, "--admin"); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	a, _ := parseAdmin("http://localhost:2019/", "--admin")
	if a.origin() != "http://localhost:2019" {
		t.Errorf("http://localhost:2019/ reaches %s", a.origin())
	}
	for _, addr := range []string{"https://gateway.example:2019", "http://localhost:2019/config", "localhost", "localhost:2019-2020"} {
		_, err := parseAdmin(addr, "--admin")
		if err == nil || !strings.Contains(err.Error(), `--admin "`+addr+`"`) || !strings.Contains(err.Error(), "host:port or http://host:port") {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

// Pointed at the API's port, a command says that is the API, and where
// the admin endpoint answers when it is where PRACTICEGW_ADMIN says.
func TestTheAPIsPortIsNotTheAdminEndpoint(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Request-Id", "req_1")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":"resource_not_found","message":"No route.","request_id":"req_1"}}`))
	}))
	defer api.Close()
	adminSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/practicegw/readiness" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"checks": []any{}})
	}))
	defer adminSrv.Close()
	apiAddr, adminAddr := strings.TrimPrefix(api.URL, "http://"), strings.TrimPrefix(adminSrv.URL, "http://")
	t.Setenv("PRACTICEGW_ADMIN", adminAddr)
	_, err := runCommand(t, listCommand(), "--firm", "frm_acme", "--admin", apiAddr)
	if err == nil || !strings.Contains(err.Error(), apiAddr+" is the gateway's API, not its admin endpoint") ||
		!strings.Contains(err.Error(), "it answers at "+adminAddr) {
		t.Errorf("against the API: %v", err)
	}
	t.Setenv("PRACTICEGW_ADMIN", apiAddr)
	_, err = runCommand(t, listCommand(), "--firm", "frm_acme")
	if err == nil || !strings.Contains(err.Error(), "is the gateway's API") || strings.Contains(err.Error(), "404") {
		t.Errorf("against the API by PRACTICEGW_ADMIN: %v", err)
	}
}

// A refusal names the flag the user typed for the parameter it refuses,
// never the parameter or the code.
func TestRefusalsNameTheFlags(t *testing.T) {
	cmd := &cobra.Command{Use: "connect"}
	cmd.Flags().String("role", "", "records, ledger or documents")
	cmd.Flags().String("tenant", "", "the organisation's id")
	cmd.Flags().String("access-key", "", "the firm's access key")
	cmd.Flags().Set("role", "ledger")
	cmd.Flags().Set("access-key", "s3cret")
	for _, c := range []struct {
		e    adminapi.Refusal
		want string
	}{
		{adminapi.Refusal{Error: "The access_key parameter is required.", Code: "parameter_missing", Param: "access_key"},
			"--access-key is required: the firm's access key"},
		{adminapi.Refusal{Error: "tenant_id must be one of the connection's choices.", Code: "parameter_invalid", Param: "tenant_id"},
			"--tenant must be one of the connection's choices."},
		{adminapi.Refusal{Error: "role must be one of records, ledger, documents.", Code: "parameter_invalid", Param: "role"},
			"--role must be one of records, ledger, documents."},
		{adminapi.Refusal{Error: "The firm's ledger role already has a connection; disconnect con_1 first.", Code: "role_connected", Param: "role"},
			"--role ledger: The firm's ledger role already has a connection; disconnect con_1 first."},
		{adminapi.Refusal{Error: "Karbon refused the access key.", Code: "parameter_invalid", Param: "access_key"},
			"--access-key: Karbon refused the access key."},
		{adminapi.Refusal{Error: "No such connection.", Code: "resource_not_found"}, "No such connection."},
	} {
		if got := inFlags(cmd, c.e); got != c.want {
			t.Errorf("%+v reads %q, want %q", c.e, got, c.want)
		}
	}
}

// version says the stamped version, else the module's, else the commit
// the toolchain recorded and whether the tree was modified.
func TestBuildVersion(t *testing.T) {
	vcs := func(mod string, kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: mod}}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	for _, c := range []struct {
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"v1.4.0", vcs("(devel)"), "v1.4.0 (go1.26.8)"},
		{"", vcs("v1.2.0"), "v1.2.0 (go1.26.8)"},
		{"", vcs("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-11-22T10:41:04Z", "vcs.modified", "true"),
			"development build (commit 0123456789ab of 2026-11-22T10:41:04Z, with uncommitted changes, go1.26.8)"},
		{"", vcs("v0.0.0-20261122104104-0123456789ab+dirty", "vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-11-22T10:41:04Z", "vcs.modified", "false"),
			"development build (commit 0123456789ab of 2026-11-22T10:41:04Z, as committed, go1.26.8)"},
		{"", vcs("v0.0.0-20261122104104-0123456789ab"), "development build (commit 0123456789ab of 2026-11-22T10:41:04Z, go1.26.8)"},
		{"", vcs("(devel)"), "development build (go1.26.8; no commit recorded: built outside a git checkout, or with -buildvcs=false)"},
	} {
		if got := buildVersion(c.stamped, c.info); got != c.want {
			t.Errorf("%q %+v:\n got %q\nwant %q", c.stamped, c.info.Main, got, c.want)
		}
	}
}

// A failed check is one line a problem: each one a joined error holds,
// else the one, without the modules Caddy was provisioning but the last.
func TestProblemsAreOneLineEach(t *testing.T) {
	joined := fmt.Errorf("loading http app module: provision http: %w",
		errors.Join(errors.New("practicegw: firm frm_a is configured twice"), errors.New("practicegw: webhooks timeout -1s is negative")))
	one := errors.New("loading http app module: provision http: server srv0: loading module 'practicegw_health': " +
		"provision http.handlers.practicegw_health: practicegw_health needs the practicegw app: loading practicegw app module: " +
		"provision practicegw: practicegw: data_dir expands to nothing")
	for _, c := range []struct {
		err  error
		want []string
	}{
		{joined, []string{"practicegw: firm frm_a is configured twice", "practicegw: webhooks timeout -1s is negative"}},
		{one, []string{"practicegw: data_dir expands to nothing"}},
		{errors.New("Caddyfile:4 - Error during parsing: unknown directive"), []string{"Caddyfile:4 - Error during parsing: unknown directive"}},
	} {
		if got := problems(c.err); !slices.Equal(got, c.want) {
			t.Errorf("%v:\n got %q\nwant %q", c.err, got, c.want)
		}
	}
}
