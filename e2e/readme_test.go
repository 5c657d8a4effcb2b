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
	"slices"
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
// (practicegw run, practicegw listen) runs in the background, a listen
// started again replacing the one before (the same terminal); every other
// one must succeed without an error body. What the README shows a command
// print (the `# ` lines right after it) is what it prints, line for line
// in order, `…` standing for what is left out, `x_...` for a value of that
// prefix, and digits and spacing for their like.
func TestREADMERunsAsWritten(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	commands := readmeCommands(string(readme), "First calls", "Webhooks", "Local development: practicegw listen")
	if len(commands) < 15 {
		t.Fatalf("found %d commands in the README's tour: %v", len(commands), commands)
	}
	shown := 0
	for _, c := range commands {
		shown += len(c.shown)
	}
	if shown < 10 {
		t.Fatalf("the README's tour shows %d lines of output: %v", shown, commands)
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
	run := &readmeRun{t: t, dir: dir, env: env, rc: rc, gateway: &gateway{t: t, addr: api, env: env},
		// The gateway listens on 127.0.0.1 alone (PRACTICEGW_LISTEN), which
		// listen names as its default --url.
		ports: strings.NewReplacer("localhost:8080", "127.0.0.1:"+apiPort, "localhost:3000", "localhost:"+rcPort)}
	run.gateway.start(defaultCaddyfile())

	placeholder := regexp.MustCompile(`\b([a-z]+(?:_[a-z]+)*)_(?:\.\.\.|…)`)
	for _, c := range commands {
		command := run.ports.Replace(c.text)
		command = placeholder.ReplaceAllStringFunc(command, func(p string) string {
			return run.last(placeholder.FindStringSubmatch(p)[1])
		})
		run.do(command, c.shown)
	}
	// Every way the README gives reached the receiver: the first listen's
	// sandbox event, the registered endpoint's live one, the second
	// listen's sandbox event.
	got := rc.wait(3, 10*time.Second)
	for i, sandbox := range []bool{true, false, true} {
		if got[i].envelope["event"] != "job.stage_changed" || got[i].envelope["sandbox"] != sandbox {
			t.Errorf("delivery %d is %s (sandbox %v), want job.stage_changed (sandbox %v)", i, got[i].envelope["event"], got[i].envelope["sandbox"], sandbox)
		}
	}
	// What the commands left running printed as the README shows.
	for _, bg := range run.running {
		eventually.NoError(t, 10*time.Second, poll, "practicegw listen to print what the README shows", func() error {
			return printedAsShown(bg.p.out.String(), bg.shown)
		})
	}
}

// make test says, in the one line the README shows, that requests to the
// vendor doubles go unchecked when the vendors' descriptions are not
// where the doubles look, and says nothing when they are.
func TestMakeTestSaysWhenVendorRequestsGoUnchecked(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, c := range readmeCommands(string(readme), "Tests and benchmarks") {
		if c.text == "make test" {
			shown = c.shown
		}
	}
	if len(shown) != 1 {
		t.Fatalf("the README shows make test print %q, want its one line about unchecked requests", shown)
	}
	dry, err := exec.Command("make", "-C", "..", "-n", "test").CombinedOutput()
	if err != nil || !strings.Contains(string(dry), "run ./cmd/practicegw-vendors -unchecked") {
		t.Fatalf("make test does not run practicegw-vendors -unchecked (%v):\n%s", err, dry)
	}
	bin, err := vendorsBinary()
	if err != nil {
		t.Fatal(err)
	}
	// A clone with nothing beside it: a module, no shared/ beside.
	clone := filepath.Join(t.TempDir(), "practicegw")
	if err := os.MkdirAll(clone, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "go.mod"), []byte("module github.com/practicegw/practicegw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	say := func(dir string, env ...string) string {
		cmd := exec.Command(bin, "-unchecked")
		cmd.Dir, cmd.Env = dir, append(slices.DeleteFunc(os.Environ(), func(v string) bool {
			return strings.HasPrefix(v, "PRACTICEGW_VENDOR_APIS=")
		}), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("practicegw-vendors -unchecked: %v\n%s", err, out)
		}
		return string(out)
	}
	out := say(clone)
	if err := printedAsShown(out, shown); err != nil || strings.Count(out, "\n") != 1 {
		t.Errorf("on a clone with no descriptions beside it: %v\n%s", err, out)
	}
	if dir, err := filepath.Abs("../../shared/vendor-apis"); err == nil {
		if _, err := os.Stat(dir); err == nil {
			if out := say(clone, "PRACTICEGW_VENDOR_APIS="+dir); out != "" {
				t.Errorf("with the descriptions at hand, it says %q", out)
			}
		}
	}
	if dir := os.Getenv("PRACTICEGW_VENDOR_APIS"); dir != "" {
		if out := say(clone, "PRACTICEGW_VENDOR_APIS="+dir); out != "" {
			t.Errorf("with the descriptions at hand, it says %q", out)
		}
	}
}

// readmeCommand is one command of a README block, continued lines joined,
// with the lines the README shows it print.
type readmeCommand struct {
	text  string
	shown []string
}

// readmeCommands are the commands of the shell blocks under the named
// sections (a section runs to the next heading of its level), in order,
// each with the comment lines right after it: what the README shows it
// print. A comment after a blank line or above a command explains, and
// is skipped.
func readmeCommands(readme string, sections ...string) []readmeCommand {
	var out []readmeCommand
	in, block, output := false, false, false
	var cmd strings.Builder
	for _, line := range strings.Split(readme, "\n") {
		if !block && strings.HasPrefix(line, "## ") {
			in = false
			for _, s := range sections {
				in = in || strings.TrimPrefix(line, "## ") == s
			}
		}
		comment := strings.HasPrefix(strings.TrimSpace(line), "#")
		switch {
		case !in:
		case !block && line == "```sh":
			block, output = true, false
		case block && line == "```":
			block = false
		case block && comment && output:
			shown, _ := strings.CutPrefix(strings.TrimSpace(line), "# ")
			out[len(out)-1].shown = append(out[len(out)-1].shown, shown)
		case block && (comment || strings.TrimSpace(line) == ""):
			output = false
		case block:
			if before, ok := strings.CutSuffix(line, "\\"); ok {
				cmd.WriteString(strings.TrimSpace(before) + " ")
				continue
			}
			cmd.WriteString(strings.TrimSpace(line))
			out = append(out, readmeCommand{text: cmd.String()})
			cmd.Reset()
			output = true
		}
	}
	return out
}

// shownToken finds what stands for something else in a line the README
// shows a command print: `…` (anything), a placeholder `x_...` (a value
// of that prefix), an example id (`evt_01m86q…`: any id of the prefix),
// digits (any digits) and spacing (any).
var shownToken = regexp.MustCompile(`…|\b[a-z]+(?:_[a-z]+)*_(?:\.\.\.|…)|\b[a-z]+_[0-9a-z]{16,}\b|\d+|\s+`)

// shownPattern is the line the README shows as a pattern of the line
// printed.
func shownPattern(line string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^\s*`)
	last := 0
	for _, m := range shownToken.FindAllStringIndex(line, -1) {
		b.WriteString(regexp.QuoteMeta(line[last:m[0]]))
		tok := line[m[0]:m[1]]
		switch {
		case tok == "…":
			b.WriteString(`.*?`)
		case strings.HasSuffix(tok, "...") || strings.HasSuffix(tok, "…"):
			b.WriteString(regexp.QuoteMeta(strings.TrimRight(tok, ".…")) + `[^\s"]+`)
		case strings.Contains(tok, "_"):
			b.WriteString(regexp.QuoteMeta(tok[:strings.Index(tok, "_")+1]) + `[0-9a-z]+`)
		case strings.TrimSpace(tok) == "":
			b.WriteString(`\s+`)
		default:
			b.WriteString(`\d+`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]) + `\s*$`)
	return regexp.MustCompile(b.String())
}

// printedAsShown says where out, what a command printed, is not what the
// README shows: each shown line must be a line of out, in order.
func printedAsShown(out string, shown []string) error {
	lines := strings.Split(out, "\n")
	for _, s := range shown {
		re := shownPattern(s)
		i := slices.IndexFunc(lines, re.MatchString)
		if i < 0 {
			return fmt.Errorf("the README shows %q (%s), which is not among what it printed next:\n%s", s, re, strings.Join(lines, "\n"))
		}
		lines = lines[i+1:]
	}
	return nil
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
	// ports turns the README's ports into the test's.
	ports *strings.Replacer
	// running are the commands left running, with what the README
	// shows them print; listen is the listen running now.
	running []backgroundCommand
	listen  *process
}

// backgroundCommand is a command the README leaves running.
type backgroundCommand struct {
	p     *process
	shown []string
}

var (
	assignment = regexp.MustCompile(`^[A-Z][A-Z0-9_]*=\S*$`)
	secretIn   = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`)
)

// do runs one command of the README, and holds what it prints to what
// the README shows.
func (r *readmeRun) do(command string, shown []string) {
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
		// Left running, as in its own terminal, where the one before it
		// ran (Ctrl-C'd first).
		if r.listen != nil {
			r.listen.stop()
		}
		p := r.background(strings.Join(append(vars, "exec", rest), " "))
		r.listen = p
		for i := range shown {
			shown[i] = r.ports.Replace(shown[i])
		}
		r.running = append(r.running, backgroundCommand{p: p, shown: shown})
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
		for i := range shown {
			shown[i] = r.ports.Replace(shown[i])
		}
		if err := printedAsShown(out.String(), shown); err != nil {
			t.Errorf("%s: %v", command, err)
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
