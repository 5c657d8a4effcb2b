package practicegw_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
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
	serviceLayer        // adapters/..., dispatcher/..., store/..., adminapi
	runtimeLayer        // firms/, cluster/: the firms' runtime and the instances that share it, below the Caddy modules
	moduleLayer         // caddymodule/...: the Caddy modules and the app that wires them
	topLayer            // cmd/ (its command line, cmd/internal/cli), bench/, e2e, deploy: what runs or tests the binary
)

// layer is the layer of a package path relative to the module root.
func layer(rel string) int {
	switch {
	case under(rel, "cmd"), under(rel, "bench"), under(rel, "e2e"), under(rel, "deploy"), rel == "":
		return topLayer
	case under(rel, "caddymodule"):
		return moduleLayer
	case under(rel, "firms"), under(rel, "cluster"):
		return runtimeLayer
	case under(rel, "adapters"), under(rel, "dispatcher"), under(rel, "store"), under(rel, "adminapi"):
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
	{"adapters", "adminapi", "", "the admin routes' answers are the gateway's"},
	{"dispatcher", "adapters", "", "the dispatcher turns change records into deliveries, whoever raised them"},
	{"dispatcher", "store", "", "the dispatcher declares the state it needs (dispatcher.Backends, kafka.Shared); the gateway opens the stores that hold it"},
	{"store", "adapters", "adapters/kit", "a store implements interfaces the shared kit declares (upstream.Budget), never a system's"},
	{"store", "adminapi", "", "the admin routes' answers are the gateway's"},
	{"adminapi", "adapters", "", "the admin answers are plain values"},
	{"adminapi", "dispatcher", "", "the admin answers are plain values"},
	{"cmd/internal/cli", "caddymodule", "", "the CLI talks to a gateway's admin endpoint over HTTP"},
	{"firms", "store", "store/connection", "the runtime declares what it keeps (firms.Store, firms.Connections); the gateway opens the stores that hold it"},
	{"firms", "dispatcher", "", "the runtime raises change records into the sink it is given; it knows nothing of webhooks"},
	{"firms", "cluster", "", "the cluster places the runtime's firms through the interface it declares; the runtime knows nothing of it"},
	{"cluster", "firms", "", "the cluster places firms through the interface it declares (cluster.Firms)"},
	{"cluster", "store", "store/credential", "the cluster declares the membership it keeps (cluster.Membership); the gateway opens the store that holds it"},
	{"cluster", "dispatcher", "", "the cluster places firms and forwards requests; it knows nothing of webhooks"},
	{"cluster", "adapters", "", "the cluster places firms whatever their systems"},
	{"caddymodule/api", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/auth", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/console", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/health", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/ingest", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/ratelimit", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
	{"caddymodule/admin", "caddymodule/gateway", "", "a handler declares what it needs; the app satisfies it"},
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
			if (under(from, "caddymodule") || under(from, "firms") || under(from, "cluster")) && vendorSystem(to) {
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
	pkgs := listPackages(t, "./...")
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
		{"cmd/internal/cli", "caddymodule/gateway"},
		{"cmd/internal/cli", "caddymodule/api"},
		{"caddymodule/api", "caddymodule/gateway"},
		{"caddymodule/gateway", "cmd/internal/cli"},
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
		{"cmd/internal/cli", "dispatcher"},
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

// below are the parts below the Caddy modules and what none of them
// reaches by any path of imports: the firms' runtime knows no Caddy module,
// store backend, dispatcher or vendor system, and Caddy only through the
// contract of a firm's system (adapters/firmsystem); the cluster knows no
// Caddy at all, nor any adapter or the runtime it places.
var below = []struct {
	root string
	// forbid are folders of ours, and packages of others, no path from
	// root reaches.
	forbid []string
	// caddyVia is the one package of ours through which root may reach
	// Caddy; "" forbids Caddy altogether.
	caddyVia string
}{
	{"firms", []string{"caddymodule", "store/bolt", "store/redis", "dispatcher", "cluster", "adapters/demo",
		"github.com/redis/go-redis", "go.etcd.io/bbolt", "github.com/segmentio/kafka-go"}, "adapters/firmsystem"},
	{"cluster", []string{"caddymodule", "store/bolt", "store/redis", "dispatcher", "firms", "adapters",
		"github.com/redis/go-redis", "go.etcd.io/bbolt", "github.com/segmentio/kafka-go"}, ""},
}

// caddy is where Caddy's packages are.
const caddy = "github.com/caddyserver/caddy"

// reachViolations lists what a part below the Caddy modules reaches that
// it must not, in deps: the packages root depends on (go list -deps), each
// with its imports.
func reachViolations(root string, forbid []string, caddyVia string, deps []pkg) []string {
	var out []string
	for _, p := range deps {
		rel, ours := strings.CutPrefix(p.ImportPath, module)
		if ours && vendorSystem(rel) {
			out = append(out, root+" reaches "+rel+": it names no vendor system")
		}
		for _, f := range forbid {
			if ours && under(rel, f) || !ours && under(p.ImportPath, f) {
				out = append(out, root+" reaches "+p.ImportPath+": forbidden below the Caddy modules")
				break
			}
		}
		for _, imp := range p.Imports {
			if under(imp, caddy) && (!ours || rel != caddyVia) && (ours || !under(p.ImportPath, caddy)) {
				out = append(out, root+" reaches Caddy through "+p.ImportPath+": only "+orNone(caddyVia)+" may bring it")
				break
			}
		}
	}
	return out
}

func orNone(via string) string {
	if via == "" {
		return "nothing"
	}
	return via
}

// TestRuntimeAndClusterReachNoCaddy holds the firms' runtime
// and the cluster to what they reach, by any path: neither sees a Caddy
// module, a store backend or the dispatcher.
func TestRuntimeAndClusterReachNoCaddy(t *testing.T) {
	for _, b := range below {
		deps := listPackages(t, "-deps", "./"+b.root)
		for _, v := range reachViolations(b.root, b.forbid, b.caddyVia, deps) {
			t.Error(v)
		}
	}
}

// Each path the runtime or the cluster must not take is caught, and the
// ones they take pass.
func TestReachViolationsCatchEveryKind(t *testing.T) {
	firms, cluster := below[0], below[1]
	ours := func(rel string, imports ...string) pkg { return pkg{ImportPath: module + rel, Imports: imports} }
	for _, c := range []struct {
		name string
		b    int
		deps []pkg
	}{
		{"a Caddy module", 0, []pkg{ours("firms"), ours("caddymodule/apierror")}},
		{"a store backend", 0, []pkg{ours("firms"), ours("store/redis")}},
		{"the dispatcher", 0, []pkg{ours("firms"), ours("dispatcher/kafka")}},
		{"a vendor system", 0, []pkg{ours("firms"), ours("adapters/karbon")}},
		{"the demo records' bbolt", 0, []pkg{ours("firms"), {ImportPath: "go.etcd.io/bbolt"}}},
		{"the cluster", 0, []pkg{ours("firms"), ours("cluster")}},
		{"Caddy directly", 0, []pkg{ours("firms", caddy+"/v2")}},
		{"Caddy through the upstream kit", 0, []pkg{ours("firms"), ours("adapters/kit/upstream", caddy+"/v2")}},
		{"Caddy through another package of ours", 1, []pkg{ours("cluster"), ours("practice/readmodel", caddy+"/v2/modules/caddyhttp")}},
		{"an adapter", 1, []pkg{ours("cluster"), ours("adapters/kit/upstream")}},
		{"the runtime", 1, []pkg{ours("cluster"), ours("firms")}},
		{"Redis", 1, []pkg{ours("cluster"), {ImportPath: "github.com/redis/go-redis/v9"}}},
	} {
		b := []struct {
			root     string
			forbid   []string
			caddyVia string
		}{{firms.root, firms.forbid, firms.caddyVia}, {cluster.root, cluster.forbid, cluster.caddyVia}}[c.b]
		if got := reachViolations(b.root, b.forbid, b.caddyVia, c.deps); len(got) == 0 {
			t.Errorf("%s reaching %s passed", b.root, c.name)
		}
	}
	for _, deps := range [][]pkg{
		{ours("firms", module+"adapters/firmsystem"), ours("adapters/firmsystem", caddy+"/v2"), {ImportPath: caddy + "/v2", Imports: []string{caddy + "/v2/notify"}}},
		{ours("firms"), ours("store/connection"), ours("practice/readmodel"), ours("adapters/kit/upstream")},
	} {
		if got := reachViolations(firms.root, firms.forbid, firms.caddyVia, deps); len(got) > 0 {
			t.Errorf("firms refused: %v", got)
		}
	}
	if got := reachViolations(cluster.root, cluster.forbid, cluster.caddyVia, []pkg{ours("cluster"), ours("store/credential"), ours("practice/readmodel")}); len(got) > 0 {
		t.Errorf("cluster refused: %v", got)
	}
}

// top is the top-level folder of a package path relative to the module
// root ("" for the root's own package).
func top(rel string) string {
	folder, _, _ := strings.Cut(rel, "/")
	return folder
}

// folderCycles lists each import between top-level folders that closes a
// cycle of them: drawn as folders, the imports are a house, whose floors
// no arrow climbs back.
func folderCycles(pkgs []pkg) []string {
	edges := map[string]map[string]string{} // folder -> folder -> one import drawing it
	for _, p := range pkgs {
		from, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			to, ours := strings.CutPrefix(imp, module)
			if !ours || top(from) == top(to) {
				continue
			}
			if edges[top(from)] == nil {
				edges[top(from)] = map[string]string{}
			}
			edges[top(from)][top(to)] = from + " imports " + to
		}
	}
	// path is a way from a to b along edges, nil when there is none.
	path := func(a, b string) []string {
		prev := map[string]string{a: ""}
		queue := []string{a}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			if cur == b {
				var out []string
				for n := b; n != a; n = prev[n] {
					out = append([]string{edges[prev[n]][n]}, out...)
				}
				return out
			}
			for next := range edges[cur] {
				if _, seen := prev[next]; !seen {
					prev[next] = cur
					queue = append(queue, next)
				}
			}
		}
		return nil
	}
	var out []string
	for from, tos := range edges {
		for to, why := range tos {
			if back := path(to, from); back != nil {
				out = append(out, fmt.Sprintf("%s -> %s closes a cycle: %s; %s", from, to, why, strings.Join(back, "; ")))
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestTopLevelFoldersFormNoCycle fails when the imports, drawn as
// top-level folders, run in a circle.
func TestTopLevelFoldersFormNoCycle(t *testing.T) {
	for _, c := range folderCycles(listPackages(t, "./...")) {
		t.Error(c)
	}
}

// A cycle of two folders, or of three, is caught, and a chain is not.
func TestFolderCyclesCatchEveryCycle(t *testing.T) {
	ours := func(rel string, imports ...string) pkg {
		p := pkg{ImportPath: module + rel}
		for _, i := range imports {
			p.Imports = append(p.Imports, module+i)
		}
		return p
	}
	for name, pkgs := range map[string][]pkg{
		"two folders":   {ours("internal/cli", "dispatcher"), ours("dispatcher", "internal/gcra")},
		"three folders": {ours("adapters/kit/upstream", "internal/gcra"), ours("internal/adminapi", "store/credential"), ours("store/storetest", "adapters/kit/upstream")},
	} {
		if len(folderCycles(pkgs)) == 0 {
			t.Errorf("a cycle of %s passed", name)
		}
	}
	if got := folderCycles([]pkg{ours("cmd/internal/cli", "dispatcher", "adminapi"), ours("adminapi", "store/credential"),
		ours("dispatcher", "internal/gcra"), ours("store/bolt", "dispatcher", "internal/sealed")}); len(got) > 0 {
		t.Errorf("a chain refused: %v", got)
	}
}

// homes are the clients of the stores and the event pipeline and the one
// folder each is imported in, with every other importer and why (the
// architecture page says the same).
var homes = []struct {
	client, home string
	others       map[string]string
}{
	{"github.com/redis/go-redis", "store/redis", map[string]string{
		"bench/pipeline": "the benchmark sets up the Kafka mode's Redis itself, beside the binary it measures"}},
	{"go.etcd.io/bbolt", "store/bolt", map[string]string{
		"adapters/demo":        "the demo records keep their own buckets, written in the transaction that writes their change",
		"internal/groupcommit": "the one group committer of the file, shared by the demo records and store/bolt",
		"bench/pipeline":       "the benchmark opens the embedded mode's file itself"}},
	{"github.com/segmentio/kafka-go", "dispatcher/kafka", nil},
}

// homeViolations lists the packages in pkgs that import a client outside
// its home and the importers its home names.
func homeViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		for _, h := range homes {
			if under(rel, h.home) {
				continue
			}
			if _, ok := h.others[rel]; ok {
				continue
			}
			for _, imp := range p.Imports {
				if under(imp, h.client) {
					out = append(out, rel+" imports "+imp+": its home is "+h.home)
					break
				}
			}
		}
	}
	return out
}

// TestBackendClientsHaveTheirHome fails when a package imports the client
// of Redis, bbolt or Kafka outside the package that talks to it.
func TestBackendClientsHaveTheirHome(t *testing.T) {
	for _, v := range homeViolations(listPackages(t, "./...")) {
		t.Error(v)
	}
}

// An import of each client outside its home is caught; its home and the
// importers it names pass.
func TestHomeViolationsCatchEveryClient(t *testing.T) {
	for _, c := range []struct{ from, client string }{
		{"caddymodule/gateway", "github.com/redis/go-redis/v9"},
		{"caddymodule/ratelimit", "github.com/redis/go-redis/v9"},
		{"caddymodule/gateway", "go.etcd.io/bbolt"},
		{"firms", "go.etcd.io/bbolt"},
		{"store/redis", "go.etcd.io/bbolt"},
		{"caddymodule/gateway", "github.com/segmentio/kafka-go"},
	} {
		if got := homeViolations([]pkg{{ImportPath: module + c.from, Imports: []string{c.client}}}); len(got) == 0 {
			t.Errorf("%s importing %s passed", c.from, c.client)
		}
	}
	for _, c := range []struct{ from, client string }{
		{"store/redis", "github.com/redis/go-redis/v9"},
		{"store/bolt", "go.etcd.io/bbolt"},
		{"adapters/demo", "go.etcd.io/bbolt"},
		{"dispatcher/kafka", "github.com/segmentio/kafka-go"},
	} {
		if got := homeViolations([]pkg{{ImportPath: module + c.from, Imports: []string{c.client}}}); len(got) > 0 {
			t.Errorf("%s importing %s refused: %v", c.from, c.client, got)
		}
	}
}

// listPackages is every package go list names with args, with its
// non-test imports.
func listPackages(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports"}, args...)...)
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
	return pkgs
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
