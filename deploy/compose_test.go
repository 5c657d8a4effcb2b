package deploy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The compose stack (compose.yaml), its load balancer and Prometheus.

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
