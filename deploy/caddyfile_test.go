package deploy

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The production Caddyfile, its Kubernetes copy and the embedded default it mirrors.

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
