package practicegw_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// module is the import path every package of the repository starts with.
const module = "github.com/practicegw/practicegw/"

// The layers, bottom up: a package imports only packages of its own layer
// or below (see docs/ARCHITECTURE.md, "Layers"). Within a layer the rules
// below say which folders may import which.
const (
	leafLayer    = iota // internal/*: private plumbing that imports nothing of ours above it
	domainLayer         // practice/...: records, changes, the read model
	serviceLayer        // adapters/..., dispatcher/..., store/..., internal/adminapi
	runtimeLayer        // cluster/: the instances that share the firms, below the Caddy modules
	moduleLayer         // caddymodule/...: the Caddy modules and the app that wires them
	topLayer            // cmd/, internal/cli, bench/, e2e, deploy: what runs or tests the binary
)

// layer is the layer of a package path relative to the module root.
func layer(rel string) int {
	switch {
	case under(rel, "cmd"), under(rel, "bench"), under(rel, "e2e"), under(rel, "deploy"), under(rel, "internal/cli"), rel == "":
		return topLayer
	case under(rel, "caddymodule"):
		return moduleLayer
	case under(rel, "cluster"):
		return runtimeLayer
	case under(rel, "adapters"), under(rel, "dispatcher"), under(rel, "store"), under(rel, "internal/adminapi"):
		return serviceLayer
	case under(rel, "practice"):
		return domainLayer
	}
	return leafLayer
}

// under reports whether rel is dir or a package below it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

// rule forbids the packages under from to import those under to, but for
// those under except.
type rule struct {
	from, to, except string
	why              string
}

var rules = []rule{
	{"adapters", "caddymodule", "", "adapters speak to vendors; the Caddy modules load them"},
	{"adapters", "dispatcher", "", "an adapter raises change records; it knows nothing of webhooks"},
	{"adapters", "store", "", "an adapter's state goes through interfaces it declares (upstream.State, notifications.Log)"},
	{"adapters", "internal/adminapi", "", "the admin routes' answers are the gateway's"},
	{"dispatcher", "adapters", "", "the dispatcher turns change records into deliveries, whoever raised them"},
	{"dispatcher", "store", "", "the dispatcher declares the state it needs (dispatcher.Backends, kafka.Shared); the gateway opens the stores that hold it"},
	{"store", "adapters", "adapters/kit", "a store implements interfaces the shared kit declares (upstream.Budget), never a system's"},
	{"store", "internal/adminapi", "", "the admin routes' answers are the gateway's"},
	{"internal/adminapi", "adapters", "", "the admin answers are plain values"},
	{"internal/adminapi", "dispatcher", "", "the admin answers are plain values"},
	{"internal/cli", "caddymodule", "", "the CLI talks to a gateway's admin endpoint over HTTP"},
	{"cluster", "store", "store/credential", "the cluster declares the membership it keeps (cluster.Membership); the gateway opens the store that holds it"},
	{"cluster", "dispatcher", "", "the cluster places firms and forwards requests; it knows nothing of webhooks"},
	{"cluster", "adapters", "", "the cluster places firms whatever their systems"},
	{"caddymodule/api", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/auth", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/console", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/health", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/ingest", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/ratelimit", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
}

// shared are what the vendor systems' packages have in common and the
// Caddy modules may use: the contract of a firm's system (adapters/firmsystem),
// the kit the adapters share, and the demo records, which are no vendor's.
var shared = []string{"adapters/firmsystem", "adapters/kit", "adapters/demo"}

// vendorSystem reports whether rel is under one vendor system's folder,
// adapters/<system> (or its doubles, adapters/vendortest).
func vendorSystem(rel string) bool {
	if !under(rel, "adapters") || rel == "adapters" {
		return false
	}
	for _, s := range shared {
		if under(rel, s) {
			return false
		}
	}
	return true
}

// allowed are the imports that run sideways against a rule for a reason
// the architecture page gives, each by its exact pair of packages: none
// now.
var allowed = map[[2]string]string{}

type pkg struct {
	ImportPath string
	Imports    []string
}

// violations lists every import of ours in pkgs that runs upward or
// against a rule, as "from -> to: why".
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok && p.ImportPath+"/" != module {
			continue
		}
		for _, imp := range p.Imports {
			to, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if _, ok := allowed[[2]string{from, to}]; ok {
				continue
			}
			if layer(to) > layer(from) {
				out = append(out, from+" -> "+to+": imports a layer above it")
				continue
			}
			if under(from, "caddymodule") && vendorSystem(to) {
				// A system is a plug-in: one folder and one import line
				// in cmd/practicegw, never named by the host.
				out = append(out, from+" -> "+to+": a Caddy module names no vendor system; it loads the system's modules (adapters/firmsystem)")
			}
			for _, r := range rules {
				if under(from, r.from) && under(to, r.to) && (r.except == "" || !under(to, r.except)) {
					out = append(out, from+" -> "+to+": "+r.why)
				}
			}
		}
	}
	return out
}

// TestImportsFormLayers fails when a package imports one above it, or
// one beside it that a rule forbids: drawn as folders, no arrow runs upward.
// Test files are not held to it: a test may use what sits above the code
// it checks (the dispatcher's harness runs the gateway's configuration).
func TestImportsFormLayers(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the repository has more", len(pkgs))
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// Each kind of upward or forbidden import is caught.
func TestViolationsCatchEveryKind(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"store/bolt", "caddymodule/auth"},
		{"practice/readmodel", "adapters/kit/upstream"},
		{"practice", "dispatcher"},
		{"internal/gcra", "practice"},
		{"adapters/karbon", "caddymodule/gateway"},
		{"adapters/kit/upstream", "store/redis"},
		{"adapters/xero", "dispatcher"},
		{"dispatcher", "adapters/kit/upstream"},
		{"dispatcher/kafka", "store/redis"},
		{"dispatcher", "store/bolt"},
		{"dispatcher/kafka", "caddymodule/gateway"},
		{"internal/cli", "caddymodule/gateway"},
		{"internal/cli", "caddymodule/api"},
		{"caddymodule/api", "caddymodule/gateway"},
		{"caddymodule/gateway", "internal/cli"},
		{"store/redis", "adapters/karbon"},
		{"caddymodule/gateway", "adapters/karbon"},
		{"caddymodule/connect", "adapters/xero"},
		{"caddymodule/api", "adapters/google_drive"},
		{"caddymodule/console", "adapters/vendortest"},
		{"cluster", "caddymodule/apierror"},
		{"cluster", "store/redis"},
		{"cluster", "dispatcher"},
		{"cluster", "adapters/kit/upstream"},
	} {
		got := violations([]pkg{{ImportPath: module + c.from, Imports: []string{module + c.to, "net/http"}}})
		if len(got) == 0 {
			t.Errorf("%s -> %s passed", c.from, c.to)
		}
	}
	for _, c := range []struct{ from, to string }{
		{"store/bolt", "dispatcher"},
		{"store/storetest", "adapters/kit/upstream"},
		{"caddymodule/gateway", "store/redis"},
		{"internal/cli", "dispatcher"},
		{"practice/readmodel", "practice/changes"},
		{"cmd/practicegw", "caddymodule/gateway"},
		{"cmd/practicegw", "adapters/karbon"},
		{"caddymodule/gateway", "adapters/demo"},
		{"caddymodule/gateway", "adapters/firmsystem"},
		{"caddymodule/connect", "adapters/kit/oauthtoken"},
		{"caddymodule/gateway", "cluster"},
		{"cluster", "practice/readmodel"},
		{"cluster", "store/credential"},
	} {
		if got := violations([]pkg{{ImportPath: module + c.from, Imports: []string{module + c.to}}}); len(got) > 0 {
			t.Errorf("%s -> %s refused: %v", c.from, c.to, got)
		}
	}
}

// The practicegw binary carries nothing of the vendor doubles: they serve
// the tests and cmd/practicegw-vendors alone.
func TestBinaryHoldsNoVendorDouble(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/practicegw").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps found %d packages; practicegw has more", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, module+"adapters/vendortest") || strings.HasPrefix(d, module+"internal/redistest") || d == "testing" {
			t.Errorf("the practicegw binary imports %s", d)
		}
	}
}

// The Go client is what integrations import: it imports nothing of the
// gateway (no Caddy, no store, no package of ours), so that importing it
// builds only the client and what it needs.
func TestClientImportsNothingOfTheGateway(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./client").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps found %d packages; the client has more", len(deps))
	}
	for _, d := range deps {
		if (strings.HasPrefix(d, module) && d != module+"client") || strings.HasPrefix(d, "github.com/caddyserver/") {
			t.Errorf("the client imports %s", d)
		}
	}
}
