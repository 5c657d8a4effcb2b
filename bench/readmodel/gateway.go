package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// gateway is the practicegw binary running on loopback.
type gateway struct {
	bin, addr, admin string
	env              []string
	cmd              *exec.Cmd
	logs             bytes.Buffer
	dir              string
	started          time.Time
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startGateway(bin, config string, poll time.Duration) (*gateway, error) {
	dir, err := os.MkdirTemp("", "practicegw-bench-readmodel-")
	if err != nil {
		return nil, err
	}
	g := &gateway{bin: bin, dir: dir}
	if g.addr, err = freeAddr(); err != nil {
		return nil, err
	}
	if g.admin, err = freeAddr(); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	g.env = append(os.Environ(), "PRACTICEGW_LISTEN="+g.addr, "PRACTICEGW_ADMIN="+g.admin,
		"PRACTICEGW_DATA="+filepath.Join(dir, "data"), "PRACTICEGW_REDIS=", "PRACTICEGW_KAFKA=", "PRACTICEGW_SECRETS_KEY=",
		"PRACTICEGW_SYNC_POLL="+poll.String(), "PRACTICEGW_SYNC_RECONCILE=24h")
	g.cmd = exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	g.cmd.Env = g.env
	g.cmd.Stdout, g.cmd.Stderr = &g.logs, &g.logs
	g.started = time.Now()
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + g.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g, nil
			}
		}
	}
	g.stop()
	return nil, fmt.Errorf("practicegw did not start within 60s:\n%s", tail(g.logs.String()))
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

func (g *gateway) stop() {
	if g.cmd != nil && g.cmd.Process != nil {
		g.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { g.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			g.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(g.dir)
}

// cpu is the gateway process's CPU time so far.
func (g *gateway) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * (time.Second / 100)
}

// syncs reads /readyz: each "sync <system>/<firm>" check's detail.
func (g *gateway) syncs() (map[string]string, error) {
	resp, err := http.Get("http://" + g.addr + "/readyz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Checks []struct {
			Name, Detail string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range body.Checks {
		if strings.HasPrefix(c.Name, "sync ") {
			out[strings.TrimPrefix(c.Name, "sync ")] = c.Detail
		}
	}
	return out, nil
}

// live reports whether every sync of firm is live, and the details.
func (g *gateway) live(firm string) (bool, []string, error) {
	s, err := g.syncs()
	if err != nil {
		return false, nil, err
	}
	var details []string
	all, any := true, false
	for name, d := range s {
		if !strings.HasSuffix(name, "/"+firm) {
			continue
		}
		any = true
		details = append(details, name+": "+d)
		all = all && strings.HasPrefix(d, "live")
	}
	return all && any, details, nil
}

// issue gets a read credential for firm through the admin endpoint, as an
// operator does, with a ceiling the load never reaches.
func (g *gateway) issue(firm string) (string, error) {
	cmd := exec.Command(g.bin, "credential", "issue", "--json", "--firm", firm, "--name", "bench readmodel",
		"--scopes", "clients:read,jobs:read,invoices:read,people:read,documents:read", "--rate-limit", "1000000/s")
	cmd.Env = g.env
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("credential issue: %v: %s", err, ee.Stderr)
		}
		return "", err
	}
	var c struct{ Token string }
	if err := json.Unmarshal(out, &c); err != nil || c.Token == "" {
		return "", fmt.Errorf("credential issue output %q: %v", out, err)
	}
	return c.Token, nil
}

// profile writes a CPU profile of the gateway over d, from Caddy's admin
// endpoint.
func (g *gateway) profile(path string, d time.Duration) error {
	c := &http.Client{Timeout: d + 30*time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", g.admin, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("profile: %d %s", resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
