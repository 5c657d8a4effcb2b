// Package deploy holds practicegw's deployment files: the image
// (Dockerfile), the production Caddyfile, a compose stack, Kubernetes
// manifests, systemd units and a Grafana dashboard. It has no Go code; this
// test checks that the files parse and agree with each other and with the
// product: images, paths, ports, probes, environment variables, commands
// and metric names. It reads files only, so it needs no Docker, cluster or
// built binary.
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
	"path"
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

// contractEnv is docs/CONTRACT.md section 1's configuration plus the credential
// signing key: the only PRACTICEGW_ variables a deployment may set.
var contractEnv = []string{
	"PRACTICEGW_LISTEN",
	"PRACTICEGW_ADMIN",
	"PRACTICEGW_DATA",
	"PRACTICEGW_REDIS",
	"PRACTICEGW_REDIS_TLS_CA",
	"PRACTICEGW_REDIS_TLS_CERT",
	"PRACTICEGW_REDIS_TLS_KEY",
	"PRACTICEGW_KAFKA",
	"PRACTICEGW_DISPATCH",
	"PRACTICEGW_RATE_LIMIT",
	"PRACTICEGW_WEBHOOK_BACKOFF_BASE",
	"PRACTICEGW_WEBHOOK_BACKOFF_FACTOR",
	"PRACTICEGW_WEBHOOK_ALLOW_CIDRS",
	"PRACTICEGW_SIGNING_KEY",
	"PRACTICEGW_SECRETS_KEY",
}

// derivedEnv are set by practicegw itself, from PRACTICEGW_LISTEN, before
// it reads a Caddyfile: Caddyfiles read them, no deployment sets them.
var derivedEnv = []string{listen.HostVar, listen.PortVar}

// secretEnv are the variables that hold secrets: every example file that
// names them must carry placeholders only, and all of them must name the
// same set.
var secretEnv = []string{
	"PRACTICEGW_SIGNING_KEY",
	"PRACTICEGW_SECRETS_KEY",
	"KARBON_ACCESS_KEY",
	"KARBON_BEARER",
	"XERO_CLIENT_ID",
	"XERO_CLIENT_SECRET",
	"XERO_WEBHOOK_KEY",
	"GRAPH_TENANT_ID",
	"GRAPH_CLIENT_ID",
	"GRAPH_CLIENT_SECRET",
}

// pinnedImages are the third-party images compose may run. Anything else
// must be built from deploy/Dockerfile.
var pinnedImages = []string{
	"apache/kafka:3.9.0",
	"redis:7.4-alpine",
	"caddy:2.10",
	"prom/prometheus:v3.5.0",
	"grafana/grafana:12.1.0",
}

// dashboardMetrics are the metric names practicegw and Caddy export that
// the dashboard may query.
var dashboardMetrics = []string{
	"caddy_http_requests_total",
	"caddy_http_request_duration_seconds_bucket",
	"practicegw_requests_total",
	"practicegw_ratelimit_decisions_total",
	"practicegw_ratelimit_fallback_total",
	"practicegw_upstream_requests_total",
	"practicegw_upstream_request_duration_seconds_bucket",
	"practicegw_upstream_breaker_state",
	"practicegw_events_total",
	"practicegw_deliveries_total",
	"practicegw_delivery_attempt_duration_seconds_bucket",
	"practicegw_consumer_lag",
	"practicegw_retry_backlog",
}

// Where things are, relative to this directory.
const (
	productionCaddyfile = "Caddyfile.production"
	kubernetesCaddyfile = "kubernetes/Caddyfile"
	embeddedCaddyfile   = "../Caddyfile"
	binaryPath          = "/usr/local/bin/practicegw"
	imageCaddyfile      = "/etc/practicegw/Caddyfile"
)

// The production Caddyfile's listeners: the API with its probes, and
// Prometheus metrics.
const (
	apiPort     = 8080
	metricsPort = 9180
)

// ---------------------------------------------------------------------------
// Every file parses.

func TestYAMLParses(t *testing.T) {
	files := deployFiles(t, ".yaml", ".yml")
	if len(files) == 0 {
		t.Fatal("no YAML files found")
	}
	for _, f := range files {
		docs := yamlDocs(t, f)
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
	}
}

func TestJSONParses(t *testing.T) {
	files := deployFiles(t, ".json")
	if len(files) == 0 {
		t.Fatal("no JSON files found")
	}
	for _, f := range files {
		var v any
		if err := json.Unmarshal(read(t, f), &v); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestCaddyfilesParse(t *testing.T) {
	for _, f := range []string{productionCaddyfile, kubernetesCaddyfile, "lb.Caddyfile", embeddedCaddyfile} {
		if _, err := parseCaddyfile(f, read(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// ---------------------------------------------------------------------------
// The production Caddyfile.

func TestProductionCaddyfile(t *testing.T) {
	// With nothing set: the API and metrics ports every other file uses,
	// the admin endpoint on the loopback only, state in ./data.
	prod := readCaddyfile(t, productionCaddyfile)
	if got, want := prod.listenPorts(), []int{apiPort, metricsPort}; !slices.Equal(got, want) {
		t.Errorf("listens on %v, want %v (the API and metrics ports every other file uses)", got, want)
	}
	global := prod.global()
	if global == nil {
		t.Fatal("no global options block")
	}
	if got := global.args("admin"); !slices.Equal(got, []string{"localhost:2019"}) {
		t.Errorf("admin %q with PRACTICEGW_ADMIN unset, want localhost:2019", got)
	}
	if got := global.child("practicegw").args("data_dir"); !slices.Equal(got, []string{"./data"}) {
		t.Errorf("data_dir %q with PRACTICEGW_DATA unset, want ./data", got)
	}

	// Each setting comes from its environment variable.
	env := map[string]string{
		"PRACTICEGW_ADMIN":    "0.0.0.0:2999",
		"PRACTICEGW_DATA":     "/data",
		"PRACTICEGW_REDIS":    "redis://redis:6379/0",
		"PRACTICEGW_KAFKA":    "kafka-1:9092,kafka-2:9092",
		"PRACTICEGW_DISPATCH": "kafka",
	}
	var kv []string
	for k, v := range env {
		kv = append(kv, k, v)
	}
	prod = readCaddyfile(t, productionCaddyfile, kv...)
	global = prod.global()
	if got := global.args("admin"); !slices.Equal(got, []string{env["PRACTICEGW_ADMIN"]}) {
		t.Errorf("admin %q, want PRACTICEGW_ADMIN's %s", got, env["PRACTICEGW_ADMIN"])
	}
	opt := global.child("practicegw")
	if opt == nil {
		t.Fatal("no practicegw global option")
	}
	for name, want := range map[string][]string{
		"data_dir":    {env["PRACTICEGW_DATA"]},
		"redis":       {env["PRACTICEGW_REDIS"]},
		"kafka":       {env["PRACTICEGW_KAFKA"]},
		"dispatch":    {env["PRACTICEGW_DISPATCH"]},
		"signing_key": {"primary", "{env.PRACTICEGW_SIGNING_KEY}"},
		"secrets_key": {"{env.PRACTICEGW_SECRETS_KEY}"},
	} {
		if got := opt.args(name); !slices.Equal(got, want) {
			t.Errorf("practicegw option %s %q, want %q", name, got, want)
		}
	}

	api := prod.site(apiPort)
	if api == nil {
		t.Fatalf("no site on :%d", apiPort)
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		h := api.handleFor(probe)
		if h == nil || !h.uses("practicegw_health") {
			t.Errorf("no handle for %s with practicegw_health", probe)
		}
	}
	v1 := api.handle("/v1/*")
	if v1 == nil {
		t.Fatal("handle /v1/* missing")
	}
	if got, want := v1.directives(), []string{"practicegw_auth", "practicegw_ratelimit", "practicegw_api"}; !slices.Equal(got, want) {
		t.Errorf("handle /v1/* runs %v, want %v", got, want)
	}

	metrics := prod.site(metricsPort)
	if metrics == nil || !slices.Equal(metrics.args("metrics"), []string{"/metrics"}) {
		t.Errorf(":%d { metrics /metrics } missing", metricsPort)
	}
}

// The production Caddyfile is the embedded default plus more: every
// directive, option and route of ../Caddyfile is in it too.
func TestProductionMirrorsEmbeddedDefault(t *testing.T) {
	prod := readCaddyfile(t, productionCaddyfile)
	embedded := readCaddyfile(t, embeddedCaddyfile)
	have := map[string]bool{}
	prod.walk(func(n *cfNode) { have[n.name()] = true })
	embedded.walk(func(n *cfNode) {
		if n.name() != "" && !have[n.name()] {
			t.Errorf("%s line %d: %s is not in %s", embeddedCaddyfile, n.Line, n.name(), productionCaddyfile)
		}
	})
	// The practicegw option's settings are the same lines; firms may differ.
	prodOpt, embOpt := prod.global().child("practicegw"), embedded.global().child("practicegw")
	if prodOpt == nil || embOpt == nil {
		t.Fatal("both Caddyfiles must have the practicegw global option")
	}
	prodLines := map[string]bool{}
	prodOpt.walk(func(n *cfNode) { prodLines[strings.Join(n.Args, " ")] = true })
	var compare func(n *cfNode)
	compare = func(n *cfNode) {
		for _, c := range n.Body {
			if c.name() == "firm" {
				continue
			}
			if line := strings.Join(c.Args, " "); !prodLines[line] {
				t.Errorf("%s line %d: practicegw option %q is not in %s", embeddedCaddyfile, c.Line, line, productionCaddyfile)
			}
			compare(c)
		}
	}
	compare(embOpt)

	prodAPI, embAPI := prod.site(apiPort), embedded.site(apiPort)
	if prodAPI == nil || embAPI == nil {
		t.Fatalf("both Caddyfiles must serve the API on :%d", apiPort)
	}
	for _, h := range embAPI.Body {
		if h.name() != "handle" {
			continue
		}
		matcher := strings.Join(h.Args[1:], " ")
		p := prodAPI.handle(matcher)
		if p == nil {
			t.Errorf("handle %s of the embedded default is not in %s", matcher, productionCaddyfile)
			continue
		}
		for _, d := range h.directives() {
			if !p.uses(d) {
				t.Errorf("handle %s: %s of the embedded default is not in %s", matcher, d, productionCaddyfile)
			}
		}
	}
}

// kustomize cannot read files above deploy/kubernetes, so the ConfigMap is
// generated from a copy.
func TestKubernetesCaddyfileIsProductionCopy(t *testing.T) {
	if !bytes.Equal(read(t, kubernetesCaddyfile), read(t, productionCaddyfile)) {
		t.Errorf("%s differs from %s: cp deploy/%s deploy/%s", kubernetesCaddyfile, productionCaddyfile, productionCaddyfile, kubernetesCaddyfile)
	}
}

// ---------------------------------------------------------------------------
// Environment variables and secrets.

var envRef = regexp.MustCompile(`PRACTICEGW_[A-Z0-9_]*[A-Z0-9]`)

// deployEnvRefs maps every PRACTICEGW_ variable named in deploy/ to the
// files naming it.
func deployEnvRefs(t *testing.T) map[string][]string {
	refs := map[string][]string{}
	for _, f := range deployFiles(t) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, v := range envRef.FindAllString(string(read(t, f)), -1) {
			if !slices.Contains(refs[v], f) {
				refs[v] = append(refs[v], f)
			}
		}
	}
	if len(refs) == 0 {
		t.Fatal("no PRACTICEGW_ variable found in deploy/")
	}
	return refs
}

func TestEnvVarsAreTheContracts(t *testing.T) {
	for v, files := range deployEnvRefs(t) {
		if slices.Contains(derivedEnv, v) {
			for _, f := range files {
				if !strings.Contains(path.Base(f), "Caddyfile") {
					t.Errorf("%s sets %s, which practicegw derives from %s", f, v, listen.Var)
				}
			}
			continue
		}
		if !slices.Contains(contractEnv, v) {
			t.Errorf("%s (in %s) is not a configuration variable of docs/CONTRACT.md section 1", v, strings.Join(files, ", "))
		}
	}
}

func TestEnvVarsDocumentedInREADME(t *testing.T) {
	documented := map[string]bool{}
	for _, v := range envRef.FindAllString(string(read(t, "../README.md")), -1) {
		documented[v] = true
	}
	var missing []string
	for v := range deployEnvRefs(t) {
		if !documented[v] {
			missing = append(missing, v)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("deploy/ sets variables README.md does not document: %s", strings.Join(missing, ", "))
	}
}

// Every example that holds secrets names the same ones, with placeholders.
func TestSecretsArePlaceholders(t *testing.T) {
	sets := map[string]map[string]string{
		"secrets.env.example":            envFile(t, "secrets.env.example"),
		"systemd/practicegw.env.example": envFile(t, "systemd/practicegw.env.example"),
		"kubernetes/secret.example.yaml": kubernetesSecret(t, "kubernetes/secret.example.yaml"),
	}
	for file, env := range sets {
		for _, name := range secretEnv {
			value, ok := env[name]
			if !ok {
				t.Errorf("%s: %s missing", file, name)
				continue
			}
			if !isPlaceholder(value) {
				t.Errorf("%s: %s=%q does not look like a placeholder; real secrets never go in the repository", file, name, value)
			}
		}
		if file != "systemd/practicegw.env.example" {
			for name := range env {
				if !slices.Contains(secretEnv, name) {
					t.Errorf("%s: %s is not a secret; it belongs with the rest of the configuration", file, name)
				}
			}
		}
	}
}

// isPlaceholder tells a placeholder from a possible secret: it says so, or
// it is base64 of text that says so.
func isPlaceholder(v string) bool {
	says := func(s string) bool {
		s = strings.ToLower(s)
		return strings.Contains(s, "replace") || strings.Contains(s, "not-secret")
	}
	if says(v) {
		return true
	}
	b, err := base64.StdEncoding.DecodeString(v)
	return err == nil && says(string(b))
}

// ---------------------------------------------------------------------------
// The image.

func TestDockerfile(t *testing.T) {
	stages := dockerStages(t, "Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a builder and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	image, _, _ := strings.Cut(build.from, " ")
	goVersion := goModVersion(t)
	if want := "golang:" + goVersion + "-"; !strings.HasPrefix(image, want) {
		t.Errorf("builder is %s, want %s... (go.mod says go %s)", image, want, goVersion)
	}
	if final.from != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("runtime stage is %s, want gcr.io/distroless/static-debian12:nonroot", final.from)
	}

	var goBuild string
	for _, in := range build.instructions {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			goBuild = in.args
		}
	}
	if goBuild == "" {
		t.Fatal("builder runs no go build")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/practicegw"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("go build lacks %s: %s", want, goBuild)
		}
	}
	if _, err := os.Stat("../cmd/practicegw/main.go"); err != nil {
		t.Errorf("go build builds ./cmd/practicegw: %v", err)
	}

	user := final.last("USER")
	if user == "" || user == "root" || strings.HasPrefix(user, "0") {
		t.Errorf("runtime stage runs as %q, want a non-root user", user)
	}
	var binary, caddyfileDst string
	for _, in := range final.instructions {
		if in.cmd != "COPY" {
			continue
		}
		args := withoutFlags(strings.Fields(in.args))
		if len(args) != 2 {
			continue
		}
		if args[1] == binaryPath {
			binary = args[1]
		}
		if args[0] == "deploy/"+productionCaddyfile {
			caddyfileDst = args[1]
		}
	}
	if binary == "" {
		t.Errorf("runtime stage does not copy the binary to %s", binaryPath)
	}
	if caddyfileDst != imageCaddyfile {
		t.Errorf("runtime stage copies deploy/%s to %q, want %s", productionCaddyfile, caddyfileDst, imageCaddyfile)
	}
	if got := execForm(t, final.last("ENTRYPOINT")); !slices.Equal(got, []string{binaryPath}) {
		t.Errorf("ENTRYPOINT %q, want [%s]", got, binaryPath)
	}
	checkRunArgs(t, "Dockerfile CMD", execForm(t, final.last("CMD")), imageCaddyfile)

	var exposed []int
	for _, p := range strings.Fields(final.last("EXPOSE")) {
		exposed = append(exposed, atoi(t, strings.TrimSuffix(p, "/tcp")))
	}
	slices.Sort(exposed)
	if want := readCaddyfile(t, productionCaddyfile).listenPorts(); !slices.Equal(exposed, want) {
		t.Errorf("EXPOSE %v, want the Caddyfile's ports %v", exposed, want)
	}
	if got := final.last("VOLUME"); got != "/data" {
		t.Errorf("VOLUME %q, want /data", got)
	}
}

// checkRunArgs checks a `practicegw run` command line.
func checkRunArgs(t *testing.T, where string, args []string, config string) {
	t.Helper()
	want := []string{"run", "--config", config, "--adapter", "caddyfile"}
	if !slices.Equal(args, want) {
		t.Errorf("%s: %q, want %q", where, args, want)
	}
}

// ---------------------------------------------------------------------------
// compose.yaml, the load balancer and Prometheus.

type composeService struct {
	name    string
	m       map[string]any
	image   string
	built   bool
	command []string
}

func (s composeService) isGateway() bool {
	return s.built && (len(s.command) == 0 || s.command[0] == "run")
}

func (s composeService) isDispatcher() bool {
	return s.built && len(s.command) > 0 && s.command[0] == "dispatcher"
}

func composeServices(t *testing.T) (map[string]composeService, map[string]any) {
	t.Helper()
	docs := yamlDocs(t, "compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents, want 1", len(docs))
	}
	top := asMap(docs[0])
	services := map[string]composeService{}
	for name, v := range asMap(top["services"]) {
		m := asMap(v)
		s := composeService{name: name, m: m, image: asString(m["image"]), command: asStrings(m["command"])}
		if b, ok := m["build"]; ok {
			context, dockerfile := ".", "Dockerfile"
			if str, ok := b.(string); ok {
				context = str
			} else {
				bm := asMap(b)
				if c := asString(bm["context"]); c != "" {
					context = c
				}
				if d := asString(bm["dockerfile"]); d != "" {
					dockerfile = d
				}
			}
			// dockerfile is relative to context, which is relative to deploy/.
			got, _ := filepath.Abs(filepath.Join(context, dockerfile))
			if want, _ := filepath.Abs("Dockerfile"); got != want {
				t.Errorf("service %s builds %s, want deploy/Dockerfile", name, filepath.Join(context, dockerfile))
			}
			s.built = true
		}
		services[name] = s
	}
	if len(services) == 0 {
		t.Fatal("compose.yaml: no services")
	}
	return services, top
}

func TestCompose(t *testing.T) {
	services, top := composeServices(t)
	volumes := asMap(top["volumes"])

	var gateways, dispatchers []string
	for name, s := range services {
		switch {
		case s.built:
		case slices.Contains(pinnedImages, s.image):
		default:
			t.Errorf("service %s runs %q: build it from deploy/Dockerfile or pin one of %v", name, s.image, pinnedImages)
		}
		if s.isGateway() {
			gateways = append(gateways, name)
		}
		if s.isDispatcher() {
			dispatchers = append(dispatchers, name)
		}

		for _, ef := range envFiles(t, s.m["env_file"]) {
			if !ef.required {
				// An optional env file holds real values: git must ignore it.
				if !slices.Contains(gitignored(t), "/"+ef.path) {
					t.Errorf("service %s: optional env_file %s is not in deploy/.gitignore", name, ef.path)
				}
				continue
			}
			mustExist(t, "service "+name+" env_file", ef.path)
		}
		for _, v := range asSlice(s.m["volumes"]) {
			source := ""
			if str, ok := v.(string); ok {
				source, _, _ = strings.Cut(str, ":")
			} else {
				source = asString(asMap(v)["source"])
			}
			if strings.HasPrefix(source, ".") || strings.HasPrefix(source, "/") {
				mustExist(t, "service "+name+" bind mount", source)
			} else if _, ok := volumes[source]; !ok {
				t.Errorf("service %s: volume %q is not declared under volumes", name, source)
			}
		}
		for _, dep := range dependsOn(s.m["depends_on"]) {
			if _, ok := services[dep]; !ok {
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
			}
		}
	}
	slices.Sort(gateways)
	slices.Sort(dispatchers)
	if len(gateways) < 2 || len(dispatchers) < 2 {
		t.Fatalf("gateways %v and dispatchers %v: want at least two of each", gateways, dispatchers)
	}

	// With separate dispatchers, a gateway that also delivered would send
	// every webhook twice.
	for _, name := range gateways {
		if got := composeEnv(services[name].m)["PRACTICEGW_DISPATCH"]; got != "off" {
			t.Errorf("gateway %s: PRACTICEGW_DISPATCH=%q, want off", name, got)
		}
	}
	for _, name := range append(gateways, dispatchers...) {
		env := composeEnv(services[name].m)
		for _, v := range []string{"PRACTICEGW_REDIS", "PRACTICEGW_KAFKA"} {
			if env[v] == "" {
				t.Errorf("%s: %s unset: every process shares Redis and Kafka", name, v)
			}
		}
		// The secrets come from the env files.
		fromFiles := map[string]bool{}
		for _, ef := range envFiles(t, services[name].m["env_file"]) {
			if ef.required {
				for k := range envFile(t, ef.path) {
					fromFiles[k] = true
				}
			}
		}
		want := []string{"PRACTICEGW_SECRETS_KEY"}
		if services[name].isGateway() {
			want = append(want, "PRACTICEGW_SIGNING_KEY")
		}
		for _, v := range want {
			if !fromFiles[v] {
				t.Errorf("%s: %s is not in its env files", name, v)
			}
		}
	}
	for _, name := range dispatchers {
		if p := listenPort(t, services[name].command); p != metricsPort {
			t.Errorf("dispatcher %s listens on %d, want %d (prometheus.yml scrapes it there)", name, p, metricsPort)
		}
	}

	// The load balancer sends to every gateway's API port and checks /readyz,
	// in each of its reverse_proxy blocks (the console's sticky one too).
	lb := readCaddyfile(t, "lb.Caddyfile")
	blocks := 0
	lb.walk(func(n *cfNode) {
		if n.name() != "reverse_proxy" {
			return
		}
		blocks++
		var upstreams []string
		for _, a := range n.Args[1:] {
			if strings.HasPrefix(a, "@") {
				continue // a matcher, not an upstream
			}
			host, port, ok := strings.Cut(a, ":")
			if !ok || !slices.Contains(gateways, host) || atoi(t, port) != apiPort {
				t.Errorf("lb.Caddyfile: upstream %s is not a gateway's :%d", a, apiPort)
			}
			upstreams = append(upstreams, host)
		}
		slices.Sort(upstreams)
		if !slices.Equal(upstreams, gateways) {
			t.Errorf("lb.Caddyfile: a reverse_proxy balances %v, want every gateway %v", upstreams, gateways)
		}
		if got := n.args("health_uri"); !slices.Equal(got, []string{"/readyz"}) {
			t.Errorf("lb.Caddyfile: health_uri %q, want /readyz", got)
		}
		if got := n.args("health_port"); got != nil && atoi(t, got[0]) != apiPort {
			t.Errorf("lb.Caddyfile: health_port %v, want %d", got, apiPort)
		}
	})
	if blocks == 0 {
		t.Error("lb.Caddyfile has no reverse_proxy")
	}
	lbPorts := lb.listenPorts()
	for name, s := range services {
		if !slices.Contains(s.volumeTargets(), "/etc/caddy/Caddyfile") {
			continue
		}
		for _, p := range asSlice(s.m["ports"]) {
			parts := strings.Split(asString(p), ":")
			if c := atoi(t, parts[len(parts)-1]); !slices.Contains(lbPorts, c) {
				t.Errorf("service %s publishes container port %d; lb.Caddyfile listens on %v", name, c, lbPorts)
			}
		}
	}

	// Prometheus scrapes every practicegw process where it serves metrics.
	prom := asMap(yamlDocs(t, "prometheus.yml")[0])
	var scraped []string
	for _, job := range asSlice(prom["scrape_configs"]) {
		for _, sc := range asSlice(asMap(job)["static_configs"]) {
			for _, target := range asStrings(asMap(sc)["targets"]) {
				host, port, _ := strings.Cut(target, ":")
				s, ok := services[host]
				switch {
				case !ok:
					t.Errorf("prometheus.yml: target %s is not a compose service", target)
				case s.isGateway() && atoi(t, port) != metricsPort:
					t.Errorf("prometheus.yml: target %s: gateways serve metrics on %d", target, metricsPort)
				case s.isDispatcher() && atoi(t, port) != listenPort(t, s.command):
					t.Errorf("prometheus.yml: target %s: the dispatcher listens on %d", target, listenPort(t, s.command))
				}
				scraped = append(scraped, host)
			}
		}
	}
	for _, name := range append(gateways, dispatchers...) {
		if !slices.Contains(scraped, name) {
			t.Errorf("prometheus.yml does not scrape %s", name)
		}
	}
}

// volumeTargets lists where s mounts things.
func (s composeService) volumeTargets() []string {
	var out []string
	for _, v := range asSlice(s.m["volumes"]) {
		if str, ok := v.(string); ok {
			parts := strings.Split(str, ":")
			if len(parts) > 1 {
				out = append(out, parts[1])
			}
		} else {
			out = append(out, asString(asMap(v)["target"]))
		}
	}
	return out
}

type envFileRef struct {
	path     string
	required bool
}

func envFiles(t *testing.T, v any) []envFileRef {
	t.Helper()
	if v == nil {
		return nil
	}
	if s, ok := v.(string); ok {
		return []envFileRef{{s, true}}
	}
	var out []envFileRef
	for _, e := range asSlice(v) {
		if s, ok := e.(string); ok {
			out = append(out, envFileRef{s, true})
			continue
		}
		m := asMap(e)
		ref := envFileRef{asString(m["path"]), true}
		if r, ok := m["required"].(bool); ok {
			ref.required = r
		}
		out = append(out, ref)
	}
	return out
}

func dependsOn(v any) []string {
	if m, ok := v.(map[string]any); ok {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	return asStrings(v)
}

func composeEnv(service map[string]any) map[string]string {
	env := map[string]string{}
	switch e := service["environment"].(type) {
	case map[string]any:
		for k, v := range e {
			env[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(asString(kv), "=")
			env[k] = v
		}
	}
	return env
}

// listenPort is the port of a `practicegw dispatcher --listen ADDR`.
func listenPort(t *testing.T, args []string) int {
	t.Helper()
	i := slices.Index(args, "--listen")
	if i < 0 || i+1 >= len(args) {
		t.Errorf("%q has no --listen address", args)
		return 0
	}
	addr := args[i+1]
	return atoi(t, addr[strings.LastIndex(addr, ":")+1:])
}

// ---------------------------------------------------------------------------
// Kubernetes.

type k8sObject struct {
	file string
	m    map[string]any
}

func (o k8sObject) kind() string { return asString(o.m["kind"]) }
func (o k8sObject) name() string { return asString(asMap(o.m["metadata"])["name"]) }
func (o k8sObject) path(keys ...string) any {
	var v any = o.m
	for _, k := range keys {
		v = asMap(v)[k]
	}
	return v
}

func TestKubernetes(t *testing.T) {
	kust := asMap(yamlDocs(t, "kubernetes/kustomization.yaml")[0])

	// Every manifest is applied, and everything applied exists.
	resources := asStrings(kust["resources"])
	var objects []k8sObject
	for _, r := range resources {
		if strings.Contains(r, "..") {
			t.Errorf("kustomization: resource %s is outside deploy/kubernetes, which kustomize refuses", r)
		}
		for _, d := range yamlDocs(t, path.Join("kubernetes", r)) {
			objects = append(objects, k8sObject{r, asMap(d)})
		}
	}
	for _, f := range deployFiles(t, ".yaml") {
		rel, _ := filepath.Rel("kubernetes", f)
		if !strings.HasPrefix(f, "kubernetes/") || rel == "kustomization.yaml" || strings.HasSuffix(f, ".example.yaml") {
			continue
		}
		if !slices.Contains(resources, filepath.ToSlash(rel)) {
			t.Errorf("%s is not among the kustomization's resources", f)
		}
	}

	// Generated ConfigMaps: their files exist, inside this directory.
	generated := map[string][]string{} // name -> keys
	for _, g := range asSlice(kust["configMapGenerator"]) {
		gm := asMap(g)
		name := asString(gm["name"])
		for _, f := range asStrings(gm["files"]) {
			key, file, ok := strings.Cut(f, "=")
			if !ok {
				key, file = path.Base(f), f
			}
			if strings.Contains(file, "..") {
				t.Errorf("configMapGenerator %s: %s is outside deploy/kubernetes, which kustomize refuses", name, file)
			}
			mustExist(t, "configMapGenerator "+name, path.Join("kubernetes", file))
			generated[name] = append(generated[name], key)
		}
		for _, l := range asStrings(gm["literals"]) {
			key, _, _ := strings.Cut(l, "=")
			generated[name] = append(generated[name], key)
		}
	}
	if !slices.Contains(generated["practicegw-caddyfile"], "Caddyfile") {
		t.Error("no ConfigMap practicegw-caddyfile generated from kubernetes/Caddyfile")
	}
	secret := kubernetesSecret(t, "kubernetes/secret.example.yaml")
	secretName := asString(asMap(asMap(yamlDocs(t, "kubernetes/secret.example.yaml")[0])["metadata"])["name"])

	caddyPorts := readCaddyfile(t, productionCaddyfile).listenPorts()
	type workload struct {
		labels map[string]string
		ports  map[string]int // container port names and numbers (as strings) -> number
	}
	workloads := map[string]workload{}
	var deployments []string
	for _, o := range objects {
		if o.kind() != "Deployment" {
			continue
		}
		deployments = append(deployments, o.name())
		where := o.file + ": Deployment " + o.name()
		labels := asStringMap(o.path("spec", "template", "metadata", "labels"))
		selector := asStringMap(o.path("spec", "selector", "matchLabels"))
		if len(selector) == 0 || !subset(selector, labels) {
			t.Errorf("%s: selector %v does not match its pod labels %v", where, selector, labels)
		}
		pod := asMap(o.path("spec", "template", "spec"))
		podSC := asMap(pod["securityContext"])
		volumes := map[string]map[string]any{}
		for _, v := range asSlice(pod["volumes"]) {
			volumes[asString(asMap(v)["name"])] = asMap(v)
		}

		containers := asSlice(pod["containers"])
		if len(containers) != 1 {
			t.Errorf("%s: %d containers, want 1", where, len(containers))
		}
		w := workload{labels: labels, ports: map[string]int{}}
		for _, c := range containers {
			cm := asMap(c)
			cwhere := where + " container " + asString(cm["name"])
			for _, p := range asSlice(cm["ports"]) {
				pm := asMap(p)
				n := asInt(pm["containerPort"])
				w.ports[strconv.Itoa(n)] = n
				if name := asString(pm["name"]); name != "" {
					w.ports[name] = n
				}
			}
			args := asStrings(cm["args"])
			if len(args) == 0 {
				t.Errorf("%s: no args: say run or dispatcher", cwhere)
				continue
			}

			// Probes: /healthz for liveness, /readyz for readiness, on a
			// port that serves them.
			var probePort int
			for probe, wantPath := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"} {
				p := asMap(cm[probe])
				if len(p) == 0 {
					if probe != "startupProbe" {
						t.Errorf("%s: no %s", cwhere, probe)
					}
					continue
				}
				get := asMap(p["httpGet"])
				if got := asString(get["path"]); got != wantPath {
					t.Errorf("%s: %s path %q, want %s", cwhere, probe, got, wantPath)
				}
				port, ok := w.ports[fmt.Sprint(get["port"])]
				if !ok {
					t.Errorf("%s: %s port %v is not a container port", cwhere, probe, get["port"])
				}
				probePort = port
			}

			env := map[string]bool{}
			for _, e := range asSlice(cm["env"]) {
				em := asMap(e)
				env[asString(em["name"])] = true
				if ref := asMap(asMap(em["valueFrom"])["secretKeyRef"]); len(ref) > 0 {
					if _, ok := secret[asString(ref["key"])]; !ok || asString(ref["name"]) != secretName {
						t.Errorf("%s: %s from Secret %v key %v, which secret.example.yaml does not have", cwhere, em["name"], ref["name"], ref["key"])
					}
				}
			}
			for _, ef := range asSlice(cm["envFrom"]) {
				efm := asMap(ef)
				if ref := asMap(efm["configMapRef"]); len(ref) > 0 {
					keys, ok := generated[asString(ref["name"])]
					if !ok {
						t.Errorf("%s: envFrom ConfigMap %v is not generated", cwhere, ref["name"])
					}
					for _, k := range keys {
						env[k] = true
					}
				}
				if ref := asMap(efm["secretRef"]); len(ref) > 0 {
					if asString(ref["name"]) != secretName {
						t.Errorf("%s: envFrom Secret %v, want %s (secret.example.yaml)", cwhere, ref["name"], secretName)
					}
					for k := range secret {
						env[k] = true
					}
				}
			}
			for _, v := range []string{"PRACTICEGW_REDIS", "PRACTICEGW_KAFKA", "PRACTICEGW_SECRETS_KEY"} {
				if !env[v] {
					t.Errorf("%s: %s is not set", cwhere, v)
				}
			}

			switch args[0] {
			case "run":
				// The Caddyfile comes from the generated ConfigMap.
				var configDir string
				for _, vm := range asSlice(cm["volumeMounts"]) {
					vmm := asMap(vm)
					if asString(asMap(volumes[asString(vmm["name"])]["configMap"])["name"]) == "practicegw-caddyfile" {
						configDir = asString(vmm["mountPath"])
					}
				}
				checkRunArgs(t, cwhere, args, path.Join(configDir, "Caddyfile"))
				if probePort != apiPort {
					t.Errorf("%s: probes on port %d, want the API port %d", cwhere, probePort, apiPort)
				}
				for name, n := range w.ports {
					if !slices.Contains(caddyPorts, n) {
						t.Errorf("%s: container port %s=%d is not one the Caddyfile listens on %v", cwhere, name, n, caddyPorts)
					}
				}
				if !env["PRACTICEGW_SIGNING_KEY"] {
					t.Errorf("%s: PRACTICEGW_SIGNING_KEY is not set", cwhere)
				}
				if !slices.ContainsFunc(asSlice(cm["env"]), func(e any) bool {
					em := asMap(e)
					return asString(em["name"]) == "PRACTICEGW_DISPATCH" && asString(em["value"]) == "off"
				}) {
					t.Errorf("%s: PRACTICEGW_DISPATCH is not off, so gateways and dispatchers would both deliver", cwhere)
				}
			case "dispatcher":
				if lp := listenPort(t, args); probePort != lp {
					t.Errorf("%s: probes on port %d, but the dispatcher listens on %d", cwhere, probePort, lp)
				}
			default:
				t.Errorf("%s: args %q: want run or dispatcher", cwhere, args)
			}

			// Non-root, read-only, no escalation, bounded.
			sc := asMap(cm["securityContext"])
			if sc["runAsNonRoot"] != true && podSC["runAsNonRoot"] != true {
				t.Errorf("%s: runAsNonRoot is not set", cwhere)
			}
			if sc["readOnlyRootFilesystem"] != true {
				t.Errorf("%s: readOnlyRootFilesystem is not true", cwhere)
			}
			if sc["allowPrivilegeEscalation"] != false {
				t.Errorf("%s: allowPrivilegeEscalation is not false", cwhere)
			}
			res := asMap(cm["resources"])
			for _, k := range []string{"requests", "limits"} {
				if m := asMap(res[k]); m["cpu"] == nil || m["memory"] == nil {
					t.Errorf("%s: resources.%s needs cpu and memory", cwhere, k)
				}
			}
			dataMounted := false
			for _, vm := range asSlice(cm["volumeMounts"]) {
				vmm := asMap(vm)
				if asString(vmm["mountPath"]) == "/data" {
					dataMounted = volumes[asString(vmm["name"])]["emptyDir"] != nil
				}
			}
			if !dataMounted {
				t.Errorf("%s: /data is not an emptyDir (the root file system is read-only)", cwhere)
			}
		}
		workloads[o.name()] = w
	}
	if len(deployments) != 2 {
		t.Errorf("Deployments %v, want a gateway and a dispatcher", deployments)
	}

	// Services and PodDisruptionBudgets select pods that exist.
	selects := func(sel map[string]string) []string {
		var out []string
		for name, w := range workloads {
			if len(sel) > 0 && subset(sel, w.labels) {
				out = append(out, name)
			}
		}
		return out
	}
	guarded := map[string]bool{}
	for _, o := range objects {
		where := o.file + ": " + o.kind() + " " + o.name()
		switch o.kind() {
		case "Service":
			matched := selects(asStringMap(o.path("spec", "selector")))
			if len(matched) != 1 {
				t.Errorf("%s selects Deployments %v, want one", where, matched)
				continue
			}
			w := workloads[matched[0]]
			for _, p := range asSlice(o.path("spec", "ports")) {
				pm := asMap(p)
				target := fmt.Sprint(pm["targetPort"])
				if pm["targetPort"] == nil {
					target = fmt.Sprint(pm["port"])
				}
				n, ok := w.ports[target]
				if !ok {
					t.Errorf("%s: targetPort %s is not a port of %s", where, target, matched[0])
				} else if !slices.Contains(caddyPorts, n) {
					t.Errorf("%s: port %d is not one the Caddyfile listens on %v", where, n, caddyPorts)
				}
			}
		case "PodDisruptionBudget":
			matched := selects(asStringMap(o.path("spec", "selector", "matchLabels")))
			if len(matched) != 1 {
				t.Errorf("%s selects Deployments %v, want one", where, matched)
			}
			for _, m := range matched {
				guarded[m] = true
			}
		}
	}
	for _, d := range deployments {
		if !guarded[d] {
			t.Errorf("Deployment %s has no PodDisruptionBudget", d)
		}
	}
}

// ---------------------------------------------------------------------------
// systemd.

func TestSystemdUnits(t *testing.T) {
	units := deployFiles(t, ".service")
	if len(units) != 2 {
		t.Fatalf("units %v, want practicegw.service and practicegw-dispatcher.service", units)
	}
	var commands []string
	var ports []int
	for _, f := range units {
		u := systemdUnit(t, f)
		svc := u["Service"]
		start := strings.Fields(one(t, f, svc, "ExecStart"))
		if len(start) < 2 || start[0] != binaryPath {
			t.Errorf("%s: ExecStart %q, want %s and a command", f, start, binaryPath)
			continue
		}
		commands = append(commands, start[1])
		switch start[1] {
		case "run":
			checkRunArgs(t, f+" ExecStart", start[1:], imageCaddyfile)
			reload := strings.Fields(one(t, f, svc, "ExecReload"))
			want := []string{binaryPath, "reload", "--config", imageCaddyfile, "--adapter", "caddyfile"}
			if !slices.Equal(reload, want) {
				t.Errorf("%s: ExecReload %q, want %q", f, reload, want)
			}
			if got := one(t, f, svc, "Type"); got != "notify" {
				t.Errorf("%s: Type=%s, want notify (Caddy reports readiness to systemd)", f, got)
			}
			ports = append(ports, readCaddyfile(t, productionCaddyfile).listenPorts()...)
		case "dispatcher":
			ports = append(ports, listenPort(t, start[1:]))
		default:
			t.Errorf("%s: ExecStart runs %q, want run or dispatcher", f, start[1])
		}

		envFile := strings.TrimPrefix(one(t, f, svc, "EnvironmentFile"), "-")
		mustExist(t, f+" EnvironmentFile example", path.Join("systemd", path.Base(envFile)+".example"))

		for key, want := range map[string]string{
			"KillSignal":      "SIGTERM",
			"NoNewPrivileges": "yes",
			"ProtectSystem":   "strict",
			"PrivateTmp":      "yes",
		} {
			if got := one(t, f, svc, key); got != want {
				t.Errorf("%s: %s=%s, want %s", f, key, got, want)
			}
		}
		if one(t, f, svc, "DynamicUser") != "yes" && svc["User"] == nil {
			t.Errorf("%s: runs as root: set DynamicUser=yes or User=", f)
		}
		for _, key := range []string{"StateDirectory", "TimeoutStopSec"} {
			if svc[key] == nil {
				t.Errorf("%s: %s is not set", f, key)
			}
		}
		if u["Install"]["WantedBy"] == nil {
			t.Errorf("%s: no WantedBy, so it cannot be enabled", f)
		}
	}
	slices.Sort(commands)
	if !slices.Equal(commands, []string{"dispatcher", "run"}) {
		t.Errorf("units run %v, want one gateway (run) and one dispatcher", commands)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d is used twice by units that may run on one machine", p)
		}
		seen[p] = true
	}
}

// systemdUnit reads a unit file: section -> key -> values in order.
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

// ---------------------------------------------------------------------------
// The Grafana dashboard.

func TestDashboard(t *testing.T) {
	var dash map[string]any
	if err := json.Unmarshal(read(t, "grafana/practicegw-dashboard.json"), &dash); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	ids := map[float64]bool{}
	var exprs int
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			pm := asMap(p)
			id, _ := pm["id"].(float64)
			if ids[id] {
				t.Errorf("panel %q: id %v is used twice", pm["title"], id)
			}
			ids[id] = true
			for _, tg := range asSlice(pm["targets"]) {
				expr := asString(asMap(tg)["expr"])
				if expr == "" {
					t.Errorf("panel %q: a target has no expr", pm["title"])
					continue
				}
				exprs++
				for _, m := range metricNames(expr) {
					used[m] = true
					if !slices.Contains(dashboardMetrics, m) {
						t.Errorf("panel %q queries %s, which is not one of practicegw's metrics: %s", pm["title"], m, expr)
					}
				}
			}
			walk(asSlice(pm["panels"]))
		}
	}
	walk(asSlice(dash["panels"]))
	for _, v := range asSlice(asMap(dash["templating"])["list"]) {
		vm := asMap(v)
		if asString(vm["type"]) != "query" {
			continue
		}
		q := vm["query"]
		if qm, ok := q.(map[string]any); ok {
			q = qm["query"]
		}
		if m := regexp.MustCompile(`label_values\(([^,)]*)`).FindStringSubmatch(asString(q)); m != nil {
			for _, name := range metricNames(m[1]) {
				if !slices.Contains(dashboardMetrics, name) {
					t.Errorf("variable %v queries %s, which is not one of practicegw's metrics", vm["name"], name)
				}
			}
		}
	}
	if exprs == 0 {
		t.Fatal("no queries found")
	}
	for _, m := range dashboardMetrics {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promVars     = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "inf", "nan"}
)

// metricNames lists the metric names a PromQL expression reads: the
// identifiers left once strings, label matchers, ranges, grouping clauses,
// Grafana variables, function calls and keywords are set aside.
func metricNames(expr string) []string {
	expr = promStrings.ReplaceAllString(expr, `""`)
	expr = promVars.ReplaceAllString(expr, "")
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && (expr[loc[0]-1] >= '0' && expr[loc[0]-1] <= '9' || expr[loc[0]-1] == '.') {
			continue // the exponent or unit of a number: 1e3, 0.5
		}
		if rest := strings.TrimLeft(expr[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function
		}
		if slices.Contains(promKeywords, strings.ToLower(name)) {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (route) (rate(practicegw_requests_total{status=~"5.."}[$__rate_interval]))`:                          {"practicegw_requests_total"},
		`histogram_quantile(0.99, sum by (le) (rate(caddy_http_request_duration_seconds_bucket{handler!="x"}[5m])))`: {"caddy_http_request_duration_seconds_bucket"},
		`count(max by (upstream) (practicegw_upstream_breaker_state) == 2) or vector(0)`:                             {"practicegw_upstream_breaker_state"},
		`a / ignoring(x) group_left b offset 1h > bool 1e3`:                                                          {"a", "b"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// ---------------------------------------------------------------------------
// Caddyfiles are read with Caddy's own parser (the one `practicegw adapt`
// uses), into a tree of directives that the checks above walk. Parsing
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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
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
