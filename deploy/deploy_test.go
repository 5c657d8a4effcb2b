// Package deploy holds practicegw's deployment files: the image
// (Dockerfile), the production Caddyfile, a compose stack, Kubernetes
// manifests, systemd units and a Grafana dashboard. It has no Go code; this
// test checks that the files parse and agree with each other and with the
// product: images, paths, ports, probes, environment variables, commands
// and metric names. It reads files only, so it needs no Docker, cluster or
// built binary.
package deploy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

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
	"PRACTICEGW_READ_MODEL_MEMORY",
	"PRACTICEGW_READ_MODEL_REPLICAS",
	"PRACTICEGW_INTERNAL_LISTEN",
	"PRACTICEGW_ADVERTISE",
	"PRACTICEGW_INTERNAL_TLS_CA",
	"PRACTICEGW_INTERNAL_TLS_CERT",
	"PRACTICEGW_INTERNAL_TLS_KEY",
	"PRACTICEGW_INTERNAL_TLS_SERVER_NAME",
}

// internalPort is the gateways' internal listener, where one forwards to
// another (PRACTICEGW_INTERNAL_LISTEN in compose and the kustomization):
// a port of theirs beside the Caddyfile's, never one of its sites.
const internalPort = 8090

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

// The internal listener stays inside: compose gives every gateway one on
// internalPort, advertised by its service name, and publishes it nowhere;
// the load balancer answers /_practicegw/ itself and never proxies to it;
// on Kubernetes no Service exposes it and a NetworkPolicy lets only
// gateway pods reach it.
func TestInternalListenerStaysInside(t *testing.T) {
	compose := asMap(yamlDocs(t, "compose.yaml")[0])
	shared := asMap(compose["x-practicegw-env"])
	if got := asString(shared["PRACTICEGW_INTERNAL_LISTEN"]); got != fmt.Sprintf(":%d", internalPort) {
		t.Errorf("compose's PRACTICEGW_INTERNAL_LISTEN is %q, want :%d", got, internalPort)
	}
	for name, svc := range asMap(compose["services"]) {
		s := asMap(svc)
		for _, p := range asSlice(s["ports"]) {
			if strings.Contains(fmt.Sprint(p), fmt.Sprint(internalPort)) {
				t.Errorf("compose service %s publishes the internal listener: %v", name, p)
			}
		}
		if !strings.HasPrefix(name, "gateway-") {
			continue
		}
		want := fmt.Sprintf("http://%s:%d", name, internalPort)
		if got := asString(asMap(s["environment"])["PRACTICEGW_ADVERTISE"]); got != want {
			t.Errorf("compose's %s advertises %q, want %s", name, got, want)
		}
	}
	lb := string(read(t, "lb.Caddyfile"))
	if !strings.Contains(lb, "@internal path /_practicegw/*") || !strings.Contains(lb, "respond @internal 404") ||
		strings.Contains(lb, fmt.Sprintf(":%d", internalPort)) {
		t.Error("lb.Caddyfile passes the internal routes on, or proxies to the internal listener")
	}
	var policed bool
	for _, f := range []string{"kubernetes/gateway.yaml", "kubernetes/network-policy.yaml"} {
		for _, d := range yamlDocs(t, f) {
			o := asMap(d)
			switch asString(o["kind"]) {
			case "Service":
				for _, p := range asSlice(asMap(o["spec"])["ports"]) {
					pm := asMap(p)
					if fmt.Sprint(pm["targetPort"]) == "internal" || fmt.Sprint(pm["targetPort"]) == fmt.Sprint(internalPort) {
						t.Errorf("%s: Service %v exposes the internal listener", f, asMap(o["metadata"])["name"])
					}
				}
			case "NetworkPolicy":
				for _, rule := range asSlice(asMap(o["spec"])["ingress"]) {
					r := asMap(rule)
					for _, p := range asSlice(r["ports"]) {
						if fmt.Sprint(asMap(p)["port"]) == fmt.Sprint(internalPort) {
							policed = len(asSlice(r["from"])) > 0
						}
					}
				}
			}
		}
	}
	if !policed {
		t.Error("no NetworkPolicy keeps the internal listener to the gateway pods")
	}
}
