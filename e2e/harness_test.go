package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// binary is the practicegw binary under test, built once per run.
var binary string

// buildDir is where the run builds its binaries, removed at its end.
var buildDir string

// vendorsBinary is practicegw-vendors, built once per run when a test
// first asks.
var vendorsBinary = sync.OnceValues(func() (string, error) {
	dir := buildDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "practicegw-vendors"); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "practicegw-vendors")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/practicegw-vendors").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building practicegw-vendors: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("PRACTICEGW_BIN"); bin != "" {
		binary = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "practicegw-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	buildDir = dir
	binary = filepath.Join(dir, "practicegw")
	build := exec.Command("go", "build", "-o", binary, "../cmd/practicegw")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building practicegw:", err)
		return 1
	}
	return m.Run()
}

// gateway is one running practicegw process.
type gateway struct {
	t     testing.TB
	addr  string // API listener, host:port
	admin string // admin endpoint, host:port
	// advertise is its internal listener's URL, when it shares the firms
	// with others.
	advertise string
	// internal is its internal listener, host:port.
	internal string
	dataDir  string
	env      []string
	proc     *process
	logs     *lockedBuffer // the running process's output
}

type gatewayOptions struct {
	dataDir string
	env     []string
	config  string // Caddyfile path; default the repository's
	addr    string // API listener the test talks to, host:port; default a free loopback port
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startGateway runs practicegw on the repository's Caddyfile (or another)
// with its own ports and data directory, and stops it at the end of the
// test.
func startGateway(t testing.TB, opts gatewayOptions) *gateway {
	t.Helper()
	if opts.dataDir == "" {
		opts.dataDir = t.TempDir()
	}
	if opts.config == "" {
		opts.config = defaultCaddyfile()
	}
	if opts.addr == "" {
		opts.addr = freePort(t)
	}
	g := &gateway{t: t, addr: opts.addr, admin: freePort(t), dataDir: opts.dataDir}
	g.env = append(os.Environ(),
		"PRACTICEGW_LISTEN="+g.addr,
		"PRACTICEGW_ADMIN="+g.admin,
		"PRACTICEGW_DATA="+opts.dataDir,
		"PRACTICEGW_REDIS=",
		"PRACTICEGW_KAFKA=",
		// Alone, a gateway generates its secrets key unless a test gives one.
		"PRACTICEGW_SECRETS_KEY=",
		// Test receivers listen on loopback, which webhook URLs may not
		// name unless allow-listed.
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8",
	)
	g.env = append(g.env, opts.env...)
	g.start(opts.config)
	return g
}

func (g *gateway) start(config string) {
	g.t.Helper()
	g.proc = startProcess(g.t, g.env, "run", "--config", config, "--adapter", "caddyfile")
	g.logs = g.proc.out
	eventually.NoError(g.t, 30*time.Second, 50*time.Millisecond, "practicegw to start", func() error {
		if g.proc.exited() {
			g.t.Fatalf("practicegw exited during start-up:\n%s", g.logs.String())
		}
		resp, err := http.Get("http://" + g.addr + "/v1/openapi.json")
		if err != nil {
			return fmt.Errorf("%v; it printed:\n%s", err, g.logs.String())
		}
		doc, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("/v1/openapi.json answered %d (%v); it printed:\n%s", resp.StatusCode, err, g.logs.String())
		}
		// Webhook receivers check deliveries against its events.
		loadCatalog(doc)
		return nil
	})
}

// stop stops the gateway gracefully, as its supervisor would.
func (g *gateway) stop() { g.proc.stop() }

// kill stops a gateway with SIGKILL, as a crash would.
func (g *gateway) kill() { g.proc.kill() }

// restart stops the gateway gracefully and starts it again on the same
// ports and data.
func (g *gateway) restart() {
	g.t.Helper()
	g.stop()
	g.start(defaultCaddyfile())
}

// defaultCaddyfile is the repository's Caddyfile, or another one named by
// PRACTICEGW_TEST_CADDYFILE (for running the suite against a variant, such
// as a production Caddyfile).
func defaultCaddyfile() string {
	if c := os.Getenv("PRACTICEGW_TEST_CADDYFILE"); c != "" {
		return c
	}
	return "../Caddyfile"
}

// poll is how often a test asks the binary whether what it waits for
// holds; the bound it waits within is generous at each call, since a
// loaded machine only makes things slower.
const poll = 10 * time.Millisecond

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// cli runs a practicegw subcommand against this gateway's admin endpoint.
func (g *gateway) cli(args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = g.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("practicegw %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

type issued struct {
	ID      string   `json:"id"`
	Token   string   `json:"token"`
	Firm    string   `json:"firm"`
	Name    string   `json:"name"`
	Scopes  []string `json:"scopes"`
	Sandbox bool     `json:"sandbox"`
}

// issue gets a credential through the CLI, as an operator would.
func (g *gateway) issue(firm string, sandbox bool, scopes ...string) issued {
	g.t.Helper()
	return g.issueWith(firm, sandbox, "", scopes...)
}

// issueWith issues a credential with its own rate limit ("" for the
// default).
func (g *gateway) issueWith(firm string, sandbox bool, rate string, scopes ...string) issued {
	g.t.Helper()
	args := []string{"credential", "issue", "--json", "--firm", firm, "--name", "test " + strings.Join(scopes, " "),
		"--scopes", strings.Join(scopes, ",")}
	if sandbox {
		args = append(args, "--sandbox")
	}
	if rate != "" {
		args = append(args, "--rate-limit", rate)
	}
	out, err := g.cli(args...)
	if err != nil {
		g.t.Fatal(err)
	}
	var c issued
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		g.t.Fatalf("issue output %q: %v", out, err)
	}
	return c
}

// allReadWrite is every scope but admin.
var allReadWrite = []string{"clients:read", "clients:write", "engagements:read", "jobs:read", "jobs:write",
	"documents:read", "invoices:read", "people:read", "events:read", "webhooks:read", "webhooks:write"}

// response is an answer with its body read.
type response struct {
	*http.Response
	body []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v: %s", r.Request.URL, err, r.body)
	}
	return v
}

func (r response) errorCode(t testing.TB) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	if e == nil {
		t.Fatalf("%s %s: no error object in %s", r.Request.Method, r.Request.URL, r.body)
	}
	code, _ := e["code"].(string)
	return code
}

// errorParam is the parameter an error body names, if any.
func (r response) errorParam(t testing.TB) string {
	t.Helper()
	r.errorCode(t)
	param, _ := r.json(t)["error"].(map[string]any)["param"].(string)
	return param
}

var client = &http.Client{Timeout: 30 * time.Second}

// do sends a request with an optional token and JSON body.
func (g *gateway) do(t testing.TB, method, path, token string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, "http://"+g.addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Response: resp, body: b}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
