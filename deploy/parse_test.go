package deploy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"gopkg.in/yaml.v3"

	"github.com/practicegw/practicegw/internal/listen"
)

// The readers the checks of every target share: systemd units, Caddyfiles
// (with Caddy's own parser), Dockerfiles, deployment files and decoded YAML.

func systemdUnit(t *testing.T, f string) map[string]map[string][]string {
	t.Helper()
	unit := map[string]map[string][]string{}
	var section string
	text := strings.ReplaceAll(string(read(t, f)), "\\\n", " ")
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			unit[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Errorf("%s line %d: %q is not key=value in a section", f, i+1, line)
				continue
			}
			unit[section][k] = append(unit[section][k], v)
		}
	}
	return unit
}

func one(t *testing.T, f string, section map[string][]string, key string) string {
	t.Helper()
	v := section[key]
	if len(v) != 1 {
		t.Errorf("%s: %s set %d times, want once", f, key, len(v))
		return ""
	}
	return v[0]
}

// Caddyfiles are read with Caddy's own parser (the one `practicegw adapt`
// uses), into a tree of directives that the checks walk. Parsing
// expands {$VAR:default} from the environment as Caddy does at start, so
// the checks see what a deployment with that environment runs; `practicegw
// adapt` with our modules is the full check, and the e2e suite runs it.

type cfNode struct {
	Args []string // the line's tokens; Args[0] is the directive or site address
	Line int
	Body []*cfNode // set when the line opens a block
}

func (n *cfNode) name() string {
	if len(n.Args) == 0 {
		return ""
	}
	return n.Args[0]
}

// child is the first direct child named name.
func (n *cfNode) child(name string) *cfNode {
	for _, c := range n.Body {
		if c.name() == name {
			return c
		}
	}
	return nil
}

// args are the arguments of the first direct child named name, or of the
// first descendant when there is no such child.
func (n *cfNode) args(name string) []string {
	c := n.child(name)
	if c == nil {
		n.walk(func(d *cfNode) {
			if c == nil && d.name() == name {
				c = d
			}
		})
	}
	if c == nil {
		return nil
	}
	return c.Args[1:]
}

func (n *cfNode) walk(f func(*cfNode)) {
	for _, c := range n.Body {
		f(c)
		c.walk(f)
	}
}

// uses reports whether directive is anywhere inside n.
func (n *cfNode) uses(directive string) bool {
	found := false
	n.walk(func(c *cfNode) { found = found || c.name() == directive })
	return found
}

// directives are the names of n's direct children, matchers aside.
func (n *cfNode) directives() []string {
	var out []string
	for _, c := range n.Body {
		if !strings.HasPrefix(c.name(), "@") {
			out = append(out, c.name())
		}
	}
	return out
}

// handle is the `handle <matcher>` block directly in site n.
func (n *cfNode) handle(matcher string) *cfNode {
	for _, c := range n.Body {
		if c.name() == "handle" && strings.Join(c.Args[1:], " ") == matcher {
			return c
		}
	}
	return nil
}

// handleFor is the handle block in site n that serves path: `handle path`
// or `handle @name` with @name matching path among others.
func (n *cfNode) handleFor(path string) *cfNode {
	matches := func(matcher string) bool {
		if matcher == path {
			return true
		}
		if !strings.HasPrefix(matcher, "@") {
			return false
		}
		for _, c := range n.Body {
			if c.name() != matcher {
				continue
			}
			if slices.Equal(c.Args[1:2], []string{"path"}) && slices.Contains(c.Args[2:], path) {
				return true
			}
			if p := c.child("path"); p != nil && slices.Contains(p.Args[1:], path) {
				return true
			}
		}
		return false
	}
	for _, c := range n.Body {
		if c.name() == "handle" && len(c.Args) == 2 && matches(c.Args[1]) {
			return c
		}
	}
	return nil
}

// global is the global options block.
func (n *cfNode) global() *cfNode {
	if len(n.Body) > 0 && len(n.Body[0].Args) == 0 {
		return n.Body[0]
	}
	return nil
}

// sites are the top-level blocks with addresses.
func (n *cfNode) sites() []*cfNode {
	var out []*cfNode
	for _, c := range n.Body {
		if len(c.Args) > 0 && c.Body != nil {
			out = append(out, c)
		}
	}
	return out
}

// site is the site listening on port.
func (n *cfNode) site(port int) *cfNode {
	for _, s := range n.sites() {
		for _, a := range s.Args {
			if p, err := addressPort(a); err == nil && p == port {
				return s
			}
		}
	}
	return nil
}

// listenPorts are the ports of every site address, sorted.
func (n *cfNode) listenPorts() []int {
	var ports []int
	for _, s := range n.sites() {
		for _, a := range s.Args {
			if p, err := addressPort(a); err == nil && !slices.Contains(ports, p) {
				ports = append(ports, p)
			}
		}
	}
	slices.Sort(ports)
	return ports
}

// addressPort is the port a site address listens on.
func addressPort(addr string) (int, error) {
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok {
		scheme, rest = "", addr
	}
	rest, _, _ = strings.Cut(rest, "/")
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.HasSuffix(rest, "]") {
		return strconv.Atoi(rest[i+1:])
	}
	switch scheme {
	case "http":
		return 80, nil
	case "https", "":
		return 443, nil
	}
	return 0, fmt.Errorf("address %q: no port", addr)
}

// parseCaddyfile reads src with Caddy's parser into a tree: one node per
// server block (the global options block has no address), one per
// directive line inside it.
func parseCaddyfile(name string, src []byte) (*cfNode, error) {
	blocks, err := caddyfile.Parse(name, src)
	if err != nil {
		return nil, err
	}
	root := &cfNode{}
	for _, sb := range blocks {
		block := &cfNode{Args: sb.GetKeysText(), Body: []*cfNode{}}
		if len(sb.Keys) > 0 {
			block.Line = sb.Keys[0].Line
		}
		for _, seg := range sb.Segments {
			d := caddyfile.NewDispenser(seg)
			for d.Next() {
				block.Body = append(block.Body, directiveNode(d))
			}
		}
		root.Body = append(root.Body, block)
	}
	return root, nil
}

// directiveNode reads the directive at d's cursor, with its block.
func directiveNode(d *caddyfile.Dispenser) *cfNode {
	n := &cfNode{Args: append([]string{d.Val()}, d.RemainingArgs()...), Line: d.Line()}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if n.Body == nil {
			n.Body = []*cfNode{}
		}
		n.Body = append(n.Body, directiveNode(d))
	}
	return n
}

// readCaddyfile parses f as Caddy does at start with env set: every
// PRACTICEGW_ variable of the test's environment is unset first, so an
// unset one takes its {$VAR:default}.
func readCaddyfile(t *testing.T, f string, env ...string) *cfNode {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PRACTICEGW_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	for _, v := range derivedEnv {
		t.Setenv(v, "")
	}
	if err := listen.Export(nil); err != nil {
		t.Fatal(err)
	}
	n, err := parseCaddyfile(f, read(t, f))
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return n
}

func TestCaddyfileReader(t *testing.T) {
	if _, err := parseCaddyfile("bad", []byte("a {\n")); err == nil {
		t.Error("an unclosed block parsed")
	}
	t.Setenv("PRACTICEGW_TEST_LISTEN", "")
	os.Unsetenv("PRACTICEGW_TEST_LISTEN")
	n, err := parseCaddyfile("Caddyfile", []byte("{\n\tadmin off\n\tservers {\n\t\ttrusted_proxies static private_ranges\n\t}\n}\n# c {\nhttp://{$PRACTICEGW_TEST_LISTEN::8080} {\n\trespond `{\n}` 200\n}\n:9180 {\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := n.listenPorts(); !slices.Equal(got, []int{8080, 9180}) {
		t.Errorf("listenPorts = %v, want [8080 9180]", got)
	}
	if got := n.global().args("admin"); !slices.Equal(got, []string{"off"}) {
		t.Errorf("admin = %q, want off", got)
	}
	if got := n.global().args("trusted_proxies"); !slices.Equal(got, []string{"static", "private_ranges"}) {
		t.Errorf("servers { trusted_proxies } = %q, want static private_ranges", got)
	}
	if got := n.site(8080).args("respond"); !slices.Equal(got, []string{"{\n}", "200"}) {
		t.Errorf("respond = %q, want the quoted body and 200", got)
	}
}

// The Dockerfile reader.

type dockerInstruction struct{ cmd, args string }

type dockerStage struct {
	from         string // image [AS name]
	instructions []dockerInstruction
}

func (s dockerStage) last(cmd string) string {
	for i := len(s.instructions) - 1; i >= 0; i-- {
		if s.instructions[i].cmd == cmd {
			return s.instructions[i].args
		}
	}
	return ""
}

func dockerStages(t *testing.T, f string) []dockerStage {
	t.Helper()
	var stages []dockerStage
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		if cmd == "FROM" {
			stages = append(stages, dockerStage{from: args})
			return
		}
		if len(stages) == 0 {
			if cmd != "ARG" {
				t.Errorf("%s: %s before FROM", f, cmd)
			}
			return
		}
		s := &stages[len(stages)-1]
		s.instructions = append(s.instructions, dockerInstruction{cmd, args})
	}
	for _, line := range strings.Split(string(read(t, f)), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			logical.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		logical.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

func execForm(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Errorf("%q is not in exec (JSON) form: %v", s, err)
	}
	return out
}

func withoutFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			out = append(out, a)
		}
	}
	return out
}

func goModVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(read(t, "../go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// Files.

// deployFiles lists the files in deploy/ (relative, with slashes) whose
// names end in one of exts, or all of them.
func deployFiles(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if len(exts) == 0 || slices.ContainsFunc(exts, func(e string) bool { return strings.HasSuffix(p, e) }) {
			out = append(out, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func read(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(f))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustExist(t *testing.T, what, p string) {
	t.Helper()
	if _, err := os.Stat(filepath.FromSlash(p)); err != nil {
		t.Errorf("%s: %s does not exist in deploy/", what, p)
	}
}

func gitignored(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(string(read(t, ".gitignore")), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, f string) []any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(read(t, f)))
	var docs []any
	for {
		var d any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// envFile reads NAME=value lines.
func envFile(t *testing.T, f string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for i, line := range strings.Split(string(read(t, f)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s line %d: not NAME=value", f, i+1)
			continue
		}
		env[k] = v
	}
	return env
}

// kubernetesSecret reads a Secret's values, decoded.
func kubernetesSecret(t *testing.T, f string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, d := range yamlDocs(t, f) {
		m := asMap(d)
		if asString(m["kind"]) != "Secret" {
			continue
		}
		for k, v := range asMap(m["data"]) {
			b, err := base64.StdEncoding.DecodeString(asString(v))
			if err != nil {
				t.Errorf("%s: %s is not base64: %v", f, k, err)
			}
			env[k] = string(b)
		}
		for k, v := range asMap(m["stringData"]) {
			env[k] = asString(v)
		}
	}
	return env
}

// Decoded YAML.

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func asString(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func asStrings(v any) []string {
	if s, ok := v.(string); ok {
		return strings.Fields(s)
	}
	var out []string
	for _, e := range asSlice(v) {
		out = append(out, asString(e))
	}
	return out
}

func asStringMap(v any) map[string]string {
	out := map[string]string{}
	for k, e := range asMap(v) {
		out[k] = asString(e)
	}
	return out
}

func asInt(v any) int {
	n, _ := v.(int)
	return n
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Errorf("%q is not a port number", s)
	}
	return n
}

func subset(sub, super map[string]string) bool {
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return true
}
