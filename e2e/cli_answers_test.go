package e2e

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runBinary runs practicegw with args and env (nil: the test's own), and
// returns what it printed, both streams, and its exit status.
func runBinary(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("practicegw %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// The command line answers a newcomer's mistakes as gh and stripe do,
// through the binary: a mistyped command, flag or argument exits 1 with
// the nearest there is and where the usage is; a group given nothing
// prints its help and exits 0.
func TestCommandLineAnswersMistakes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"credential", "lst"}, []string{`unknown command "lst" for "practicegw credential"`, "Did you mean this?", "\tlist", "Run 'practicegw credential --help' for usage."}},
		{[]string{"credential", "list", "--fimr", "frm_acme"}, []string{`unknown flag --fimr for "practicegw credential list"`, "\t--firm"}},
		{[]string{"connect", "lst"}, []string{`unknown command "lst" for "practicegw connect"`, "\tlist"}},
		{[]string{"sync", "stats", "--firm", "frm_acme"}, []string{`unknown command "stats"`, "\tstatus"}},
		{[]string{"credentail", "list"}, []string{`unknown command "credentail" for "practicegw"`, "\tcredential"}},
		{[]string{"credential", "revoke"}, []string{"needs the credential's id"}},
		{[]string{"credential", "issue", "--firm", "frm_acme", "--name", "x"}, []string{"--scopes is required"}},
		{[]string{"credential", "list", "--admin", "https://localhost:2019"}, []string{`--admin "https://localhost:2019"`, "host:port or http://host:port"}},
	} {
		out, code := runBinary(t, nil, c.args...)
		if code != 1 {
			t.Errorf("practicegw %s exits %d, want 1:\n%s", strings.Join(c.args, " "), code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("practicegw %s does not say %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
	for _, args := range [][]string{{"credential"}, {"connect", "--help"}, {"sync"}} {
		if out, code := runBinary(t, nil, args...); code != 0 || !strings.Contains(out, "Available Commands:") {
			t.Errorf("practicegw %s exits %d:\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// Help names every system module the binary holds (as list-modules lists
// them), each under its role, and connect's help and --system too;
// statuses read in words.
func TestHelpNamesTheRegisteredSystems(t *testing.T) {
	modules, code := runBinary(t, nil, "list-modules")
	if code != 0 {
		t.Fatalf("list-modules exits %d:\n%s", code, modules)
	}
	systems := regexp.MustCompile(`(?m)^practicegw\.systems\.(records|ledger|documents)\.(\w+)$`).FindAllStringSubmatch(modules, -1)
	if len(systems) < 9 {
		t.Fatalf("list-modules names %d systems:\n%s", len(systems), modules)
	}
	help, _ := runBinary(t, nil, "--help")
	connect, _ := runBinary(t, nil, "connect", "--help")
	for _, s := range systems {
		role, name := s[1], s[2]
		for what, text := range map[string]string{"--help": help, "connect --help": connect} {
			line := regexp.MustCompile(`(?m)^  ` + role + ` +[^\n]*(\n {13}[^\n]*)*`).FindString(text)
			if !strings.Contains(line, "("+name+")") {
				t.Errorf("%s does not name %s among the %s systems:\n%s", what, name, role, line)
			}
		}
		if !regexp.MustCompile(`--system string +the system, one of [^\n]*\b` + name + `\b`).MatchString(connect) {
			t.Errorf("connect's --system does not name %s:\n%s", name, connect)
		}
	}
	for _, raw := range []string{"choose_tenant", "needs_reconnect", "system_not_connected"} {
		for _, args := range [][]string{{"connect", "--help"}, {"connect", "choose", "--help"}, {"sync", "status", "--help"}} {
			if out, _ := runBinary(t, nil, args...); strings.Contains(out, raw) {
				t.Errorf("practicegw %s says %s:\n%s", strings.Join(args, " "), raw, out)
			}
		}
	}
}

// version reads the module's build information: what `go version -m`
// finds in the binary, the commit and whether the tree was modified when
// the toolchain recorded them.
func TestVersionReadsTheBuildInformation(t *testing.T) {
	out, code := runBinary(t, nil, "version")
	if code != 0 {
		t.Fatalf("version exits %d: %s", code, out)
	}
	info, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatal(err)
	}
	setting := func(key string) string {
		m := regexp.MustCompile(`(?m)^\s+build\s+` + regexp.QuoteMeta(key) + `=(\S+)$`).FindSubmatch(info)
		if m == nil {
			return ""
		}
		return string(m[1])
	}
	first := strings.SplitN(out, "\n", 2)[0]
	rev := setting("vcs.revision")
	switch {
	case rev != "":
		if !strings.Contains(first, "commit "+rev[:12]) {
			t.Errorf("version says %q; the binary records commit %s", first, rev)
		}
		modified := map[string]string{"true": "with uncommitted changes", "false": "as committed"}[setting("vcs.modified")]
		if !strings.Contains(first, modified) {
			t.Errorf("version says %q; the binary records vcs.modified=%s", first, setting("vcs.modified"))
		}
	default:
		if !strings.Contains(first, "no commit recorded") || !strings.Contains(first, "-buildvcs=false") {
			t.Errorf("version says %q of a binary with no commit recorded:\n%s", first, info)
		}
	}
	if goVersion := regexp.MustCompile(`^\S+: (go\S+)`).FindSubmatch(info); goVersion == nil || !strings.Contains(first, string(goVersion[1])) {
		t.Errorf("version says %q, not the toolchain of\n%s", first, info)
	}
}

// --admin takes a URL as well as host:port; pointed at the API's port, a
// command says that is the API and where the admin endpoint answers.
func TestAdminFlagForms(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	for _, admin := range []string{g.admin, "http://" + g.admin, "http://" + g.admin + "/"} {
		if out, code := runBinary(t, g.env, "credential", "list", "--firm", "frm_acme", "--admin", admin); code != 0 || !strings.Contains(out, "ID") {
			t.Errorf("--admin %s exits %d:\n%s", admin, code, out)
		}
	}
	out, code := runBinary(t, g.env, "credential", "list", "--firm", "frm_acme", "--admin", g.addr)
	if code != 1 || !strings.Contains(out, g.addr+" is the gateway's API, not its admin endpoint") ||
		!strings.Contains(out, "it answers at "+g.admin) || regexp.MustCompile(`\b404\b`).MatchString(out) {
		t.Errorf("--admin %s (the API) exits %d:\n%s", g.addr, code, out)
	}
	env := append(append([]string(nil), g.env...), "PRACTICEGW_ADMIN="+g.addr)
	out, code = runBinary(t, env, "credential", "list", "--firm", "frm_acme")
	// Where the admin endpoint is: the start line's word for it, or the
	// default address if a gateway of this machine answers there.
	if code != 1 || !strings.Contains(out, "is the gateway's API") || !strings.Contains(out, `("admin")`) && !strings.Contains(out, "it answers at localhost:2019") {
		t.Errorf("PRACTICEGW_ADMIN=%s (the API) exits %d:\n%s", g.addr, code, out)
	}
}

// Every command that names a firm refuses one the gateway does not serve,
// naming --firm, and exits 1; a refusal of what a command sent names the
// flag that carried it, never the API's code or parameter; connect list
// says statuses in words, and a disconnect from the command line says who
// did it in the words the console and the API use.
func TestCommandLineRefusalsNameTheFlags(t *testing.T) {
	addr := freePort(t)
	f := startConnectFirm(t, addr)
	g := f.gateway(t, addr)
	expect := func(args []string, code int, want ...string) string {
		t.Helper()
		out, got := runBinary(t, g.env, args...)
		if got != code {
			t.Errorf("practicegw %s exits %d, want %d:\n%s", strings.Join(args, " "), got, code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("practicegw %s does not say %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		for _, raw := range []string{"resource_not_found", "parameter_invalid", "parameter_missing", "role_connected",
			"system_not_registered", "connection_state", "access_key", "tenant_id", "choose_tenant"} {
			if strings.Contains(out, raw) {
				t.Errorf("practicegw %s says %s:\n%s", strings.Join(args, " "), raw, out)
			}
		}
		return out
	}
	const nosuch = "--firm frm_nosuch: This gateway serves no such firm"
	for _, args := range [][]string{
		{"credential", "issue", "--firm", "frm_nosuch", "--name", "x", "--scopes", "jobs:read"},
		{"credential", "list", "--firm", "frm_nosuch"},
		{"sync", "status", "--firm", "frm_nosuch"},
		{"sync", "resync", "--firm", "frm_nosuch", "--system", "records"},
		{"connect", "--firm", "frm_nosuch", "--role", "ledger", "--system", "xero"},
		{"connect", "list", "--firm", "frm_nosuch"},
		{"connect", "disconnect", "--firm", "frm_nosuch", "--connection", "con_1"},
		{"trigger", "job.stage_changed", "--firm", "frm_nosuch"},
	} {
		expect(args, 1, nosuch)
	}

	expect([]string{"credential", "issue", "--firm", "frm_hollis", "--name", "x", "--scopes", "jobs:reed"}, 1, "--scopes jobs:reed: ", `unknown scope "jobs:reed"`)
	expect([]string{"credential", "issue", "--firm", "frm_hollis", "--name", "x", "--scopes", "jobs:read", "--rate-limit", "fast"}, 1, "--rate-limit fast: ")
	expect([]string{"connect", "--firm", "frm_hollis", "--role", "records", "--system", "karbon"}, 1, "--access-key")
	expect([]string{"connect", "--firm", "frm_hollis", "--role", "bookkeeping", "--system", "xero"}, 1, "--role must be one of records, ledger, documents")
	expect([]string{"connect", "--firm", "frm_hollis", "--role", "documents", "--system", "dropbox"}, 1, "--system dropbox: ", "No Dropbox app is registered")
	expect([]string{"connect", "--firm", "frm_hollis", "--role", "ledger", "--system", "xero", "--timeout", "1s"}, 1, "still pending")
	list := expect([]string{"connect", "list", "--firm", "frm_hollis"}, 0, "waiting for consent")
	id := regexp.MustCompile(`con_\w+`).FindString(list)
	expect([]string{"connect", "--firm", "frm_hollis", "--role", "ledger", "--system", "xero"}, 1, "--role ledger: ", "already has a connection; disconnect "+id)
	expect([]string{"connect", "choose", "--firm", "frm_hollis", "--connection", id, "--tenant", "t1"}, 1, "is waiting for consent: there is no organisation to choose")
	expect([]string{"connect", "disconnect", "--firm", "frm_hollis", "--connection", "con_nosuch"}, 1, "--connection con_nosuch: No such connection.")
	expect([]string{"connect", "disconnect", "--firm", "frm_hollis", "--connection", id}, 0, "disconnected")
	expect([]string{"connect", "list", "--firm", "frm_hollis"}, 0, "disconnected by the gateway's operator with practicegw connect disconnect")
	expect([]string{"trigger", "job.moved", "--firm", "frm_hollis"}, 1, `"job.moved" is not an event kind the sandbox raises`)
	expect([]string{"sync", "resync", "--firm", "frm_hollis", "--system", "ledgr"}, 1, "--system ledgr: The firm has no real system")
}

// validate (and adapt --validate) checks the configuration as written
// without opening the stores: beside a gateway running on the same data
// directory, whose file it holds locked, it answers at once (it waited
// for the lock, then failed, before); a configuration naming a Redis
// nobody serves is checked without it, its data directory never made; a
// broken one is one line a problem, the file's name first, and exit 1.
func TestValidateOpensNoStore(t *testing.T) {
	addr := freePort(t)
	g := startGateway(t, gatewayOptions{addr: addr, config: "../config/try-connections.Caddyfile",
		env: []string{"PRACTICEGW_PUBLIC_URL=http://" + addr}})
	for _, args := range [][]string{
		{"validate", "--config", "../config/try-connections.Caddyfile"},
		{"adapt", "--validate", "--config", "../config/try-connections.Caddyfile"},
	} {
		start := time.Now()
		cmd := exec.Command(binary, args...)
		cmd.Env = g.env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || time.Since(start) > 3*time.Second {
			t.Fatalf("practicegw %s: %v after %s:\n%s%s", strings.Join(args, " "), err, time.Since(start), stdout.String(), stderr.String())
		}
		if !strings.HasSuffix(stdout.String(), "Valid configuration\n") || stderr.Len() > 0 {
			t.Errorf("practicegw %s says:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		}
	}

	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	redis := write("redis.Caddyfile", `{
	admin off
	practicegw {
		data_dir `+filepath.Join(dir, "data")+`
		redis redis://127.0.0.1:1/0
		secrets_key `+key+`
		firm frm_a {
			records demo
		}
	}
}
http://:18999 {
	practicegw_api
}
`)
	if out, code := runBinary(t, g.env, "validate", "--config", redis); code != 0 || out != "Valid configuration\n" {
		t.Errorf("a configuration on an unserved Redis exits %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("checking made the configuration's data directory")
	}
	broken := write("broken.Caddyfile", `{
	admin off
	practicegw {
		data_dir `+filepath.Join(dir, "data")+`
		deprecated POST /v1/jobs/{id}/stage 2027-06-01 2026-06-01
		firm frm_a {
			records demo
		}
		firm frm_a {
			name "twice"
		}
	}
}
http://:18999 {
	practicegw_api
}
`)
	out, code := runBinary(t, g.env, "validate", "--config", broken)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) < 2 {
		t.Fatalf("a broken configuration exits %d:\n%s", code, out)
	}
	for _, want := range []string{"practicegw: firm frm_a is configured twice", "practicegw: deprecated POST /v1/jobs/{id}/stage: sunset 2026-06-01 is not after 2027-06-01"} {
		if !strings.Contains(out, broken+": "+want+"\n") {
			t.Errorf("validate does not say, in a line of its own, %q:\n%s", want, out)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, broken+": ") || strings.Contains(l, "loading http app module") || len(l) > 300 {
			t.Errorf("a line of validate's answer: %q", l)
		}
	}
}
