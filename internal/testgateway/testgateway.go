// Package testgateway runs a practicegw binary for what is tested or
// generated against a real gateway outside the e2e suite: the clients'
// examples, and the served OpenAPI document the clients are generated
// from. It builds the binary from the module, starts it on free loopback
// ports with its own data directory, and drives it through its command
// line, as an operator would. It takes no testing.T, so that a TestMain
// and go generate can use it alike.
package testgateway

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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build builds cmd/practicegw of the module the working directory is in
// into dir, and returns the binary's path.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "practicegw")
	build := exec.Command("go", "build", "-o", bin, "./cmd/practicegw")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building practicegw: %v\n%s", err, out)
	}
	return bin, nil
}

// ModuleRoot is the directory of the go.mod of the working directory.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

// Options say which gateway to run.
type Options struct {
	Binary    string   // the practicegw binary (Build)
	Caddyfile string   // the configuration; default the module's root Caddyfile
	Dir       string   // where its data directory goes
	Env       []string // added to its environment, after the ports and data directory
}

// Gateway is one running practicegw process.
type Gateway struct {
	// URL is where it serves /v1, http://127.0.0.1:port.
	URL string
	// Admin is its admin endpoint (Caddy's, with /debug/pprof),
	// http://127.0.0.1:port.
	Admin string

	bin  string
	env  []string
	cmd  *exec.Cmd
	out  *buffer
	done chan struct{}
}

// Start runs a gateway alone (bbolt in its data directory, no Redis or
// Kafka), on free loopback ports, and waits until it serves its OpenAPI
// document.
func Start(o Options) (*Gateway, error) {
	if o.Caddyfile == "" {
		root, err := ModuleRoot()
		if err != nil {
			return nil, err
		}
		o.Caddyfile = filepath.Join(root, "Caddyfile")
	}
	api, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	g := &Gateway{URL: "http://" + api, Admin: "http://" + admin, bin: o.Binary, out: &buffer{}, done: make(chan struct{})}
	g.env = append(os.Environ(),
		"PRACTICEGW_LISTEN="+api, "PRACTICEGW_ADMIN="+admin, "PRACTICEGW_DATA="+filepath.Join(o.Dir, "data"),
		"PRACTICEGW_REDIS=", "PRACTICEGW_KAFKA=", "PRACTICEGW_SECRETS_KEY=")
	g.env = append(g.env, o.Env...)
	g.cmd = exec.Command(o.Binary, "run", "--config", o.Caddyfile, "--adapter", "caddyfile")
	g.cmd.Env = g.env
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	if err := g.waitServing(time.Minute); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

func (g *Gateway) waitServing(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := g.Get("/v1/openapi.json"); err == nil {
			return nil
		}
		select {
		case <-g.done:
			return fmt.Errorf("practicegw exited during start-up:\n%s", g.Logs())
		case <-ctx.Done():
			return fmt.Errorf("practicegw did not serve /v1/openapi.json within %s:\n%s", within, g.Logs())
		case <-tick.C:
		}
	}
}

// Get answers the body of a GET of path that answered 200.
func (g *Gateway) Get(path string) ([]byte, error) {
	resp, err := http.Get(g.URL + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s answered %s", path, resp.Status)
	}
	return body, err
}

// CLI runs a practicegw command against the gateway's admin endpoint and
// answers what it printed.
func (g *Gateway) CLI(args ...string) (string, error) {
	cmd := exec.Command(g.bin, args...)
	cmd.Env = g.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("practicegw %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// Credential is a credential to issue.
type Credential struct {
	Firm      string
	Sandbox   bool   // its firm's sandbox records only (pgw_test_)
	RateLimit string // its ceiling, N/s, N/m or N/h; "" for the gateway's
	Scopes    []string
}

// Issue issues a credential and answers its token.
func (g *Gateway) Issue(c Credential) (string, error) {
	args := []string{"credential", "issue", "--firm", c.Firm, "--name", "testgateway", "--scopes", strings.Join(c.Scopes, ","), "--json"}
	if c.Sandbox {
		args = append(args, "--sandbox")
	}
	if c.RateLimit != "" {
		args = append(args, "--rate-limit", c.RateLimit)
	}
	out, err := g.CLI(args...)
	if err != nil {
		return "", err
	}
	var issued struct{ Token string }
	if err := json.Unmarshal([]byte(out), &issued); err != nil || issued.Token == "" {
		return "", fmt.Errorf("credential issue printed %q (%v)", out, err)
	}
	return issued.Token, nil
}

// Logs is what the gateway has printed.
func (g *Gateway) Logs() string { return g.out.String() }

// Pid is the gateway process's id.
func (g *Gateway) Pid() int { return g.cmd.Process.Pid }

// Stop stops the gateway as its supervisor would (SIGTERM), killing it
// if it has not stopped within 10 seconds.
func (g *Gateway) Stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// buffer is what the process prints, written by its output's copier and
// read by the caller.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
