package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// The README's tour runs as written: the shell blocks of its First calls,
// Webhooks and practicegw listen sections, top to bottom, against a fresh
// gateway on the repository's Caddyfile. Placeholders are filled the way
// the README says (each `x_...` is the last such value a command before it
// printed), and the ports it names are the test's own: localhost:8080 is
// the gateway (PRACTICEGW_LISTEN), localhost:3000 a receiver that checks
// every delivery's signature. A command the README leaves running
// (practicegw run, practicegw listen) runs in the background; every other
// one must succeed without an error body.
func TestREADMERunsAsWritten(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	commands := readmeCommands(string(readme), "First calls", "Webhooks", "Local development: practicegw listen")
	if len(commands) < 15 {
		t.Fatalf("found %d commands in the README's tour: %q", len(commands), commands)
	}

	rc := newReceiver(t)
	_, rcPort, _ := net.SplitHostPort(strings.TrimPrefix(rc.srv.URL, "http://"))
	api := freePort(t)
	_, apiPort, _ := net.SplitHostPort(api)
	dir := t.TempDir()
	env := append(os.Environ(),
		"PRACTICEGW_LISTEN="+api,
		"PRACTICEGW_ADMIN="+freePort(t),
		"PRACTICEGW_DATA="+filepath.Join(dir, "data"),
		"PRACTICEGW_REDIS=", "PRACTICEGW_KAFKA=", "PRACTICEGW_SECRETS_KEY=", "PRACTICEGW_WEBHOOK_ALLOW_CIDRS=",
	)
	run := &readmeRun{t: t, dir: dir, env: env, rc: rc, gateway: &gateway{t: t, addr: api, env: env}}
	run.gateway.start(defaultCaddyfile())

	placeholder := regexp.MustCompile(`\b([a-z]+(?:_[a-z]+)*)_(?:\.\.\.|…)`)
	for _, command := range commands {
		command = strings.NewReplacer("localhost:8080", "localhost:"+apiPort, "localhost:3000", "localhost:"+rcPort).Replace(command)
		command = placeholder.ReplaceAllStringFunc(command, func(p string) string {
			return run.last(placeholder.FindStringSubmatch(p)[1])
		})
		run.do(command)
	}
	// Both ways the README gives reached the receiver: listen's sandbox
	// event, then the registered endpoint's live one.
	got := rc.wait(2, 10*time.Second)
	for i, sandbox := range []bool{true, false} {
		if got[i].envelope["event"] != "job.stage_changed" || got[i].envelope["sandbox"] != sandbox {
			t.Errorf("delivery %d is %s (sandbox %v), want job.stage_changed (sandbox %v)", i, got[i].envelope["event"], got[i].envelope["sandbox"], sandbox)
		}
	}
}

// readmeCommands are the commands of the shell blocks under the named
// sections (a section runs to the next heading of its level), in order:
// continued lines joined, comment lines dropped.
func readmeCommands(readme string, sections ...string) []string {
	var out []string
	in, block := false, false
	var cmd strings.Builder
	for _, line := range strings.Split(readme, "\n") {
		if !block && strings.HasPrefix(line, "## ") {
			in = false
			for _, s := range sections {
				in = in || strings.TrimPrefix(line, "## ") == s
			}
		}
		switch {
		case !in:
		case !block && line == "```sh":
			block = true
		case block && line == "```":
			block = false
		case block && strings.HasPrefix(strings.TrimSpace(line), "#"):
		case block:
			if before, ok := strings.CutSuffix(line, "\\"); ok {
				cmd.WriteString(strings.TrimSpace(before) + " ")
				continue
			}
			cmd.WriteString(strings.TrimSpace(line))
			out = append(out, cmd.String())
			cmd.Reset()
		}
	}
	return out
}

// readmeRun is one reading of the README: the gateway it started, the
// commands it left running, and what every command printed.
type readmeRun struct {
	t       *testing.T
	dir     string
	env     []string
	rc      *receiver
	gateway *gateway
	outputs []string
	// delivered is how many deliveries the receiver should have by now.
	delivered  int
	registered bool
}

var (
	assignment = regexp.MustCompile(`^[A-Z][A-Z0-9_]*=\S*$`)
	secretIn   = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)
)

// do runs one command of the README.
func (r *readmeRun) do(command string) {
	t := r.t
	t.Helper()
	fields := strings.Fields(command)
	var vars []string
	for len(fields) > 0 && assignment.MatchString(fields[0]) {
		vars, fields = append(vars, fields[0]), fields[1:]
	}
	rest := strings.Join(fields, " ")
	switch {
	case rest == "go build -o practicegw ./cmd/practicegw":
		// The binary the suite built.
		b, err := os.ReadFile(binary)
		if err == nil {
			err = os.WriteFile(filepath.Join(r.dir, "practicegw"), b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	case rest == "go run ./cmd/practicegw run" || rest == "./practicegw run":
		r.gateway.stop()
		r.gateway.env = append(append([]string(nil), r.env...), vars...)
		r.gateway.start(defaultCaddyfile())
	case strings.HasPrefix(rest, "export "):
		name, value, _ := strings.Cut(strings.TrimPrefix(rest, "export "), "=")
		r.env = append(r.env, name+"="+value)
	case strings.HasPrefix(rest, "./practicegw listen "):
		// Left running, as in its own terminal.
		p := r.background(strings.Join(append(vars, "exec", rest), " "))
		eventually.NoError(t, 20*time.Second, poll, "listen to connect", func() error {
			if !strings.Contains(p.out.String(), "connected; waiting for events") {
				return fmt.Errorf("it printed %q", p.out.String())
			}
			return nil
		})
		r.rc.setSecrets(secretIn.FindString(p.out.String()))
	default:
		cmd := exec.Command("bash", "-c", command)
		cmd.Dir, cmd.Env = r.dir, r.env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", command, err, out.String())
		}
		var answer map[string]any
		if json.Unmarshal(out.Bytes(), &answer) == nil && answer["error"] != nil {
			t.Fatalf("%s answered an error:\n%s", command, out.String())
		}
		r.outputs = append(r.outputs, out.String())
		switch {
		case strings.Contains(command, "/v1/webhook_endpoints"):
			r.registered = true
			r.rc.setSecrets(secretIn.FindString(out.String()))
		case strings.HasPrefix(rest, "./practicegw trigger "), r.registered && strings.Contains(command, "/stage "):
			r.delivered++
			r.rc.wait(r.delivered, 20*time.Second)
		}
	}
}

// last is the value a command printed last of the placeholder's kind.
func (r *readmeRun) last(prefix string) string {
	value := regexp.MustCompile(`\b` + prefix + `_[A-Za-z0-9_.-]+`)
	for i := len(r.outputs) - 1; i >= 0; i-- {
		if v := value.FindString(r.outputs[i]); v != "" {
			return strings.TrimRight(v, ".")
		}
	}
	r.t.Fatalf("no command before printed a %s_ value", prefix)
	return ""
}

// background starts a command the README leaves running, and ends it with
// the test.
func (r *readmeRun) background(command string) *process {
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir, cmd.Env = r.dir, r.env
	return startCommand(r.t, command, cmd, syscall.SIGINT)
}
