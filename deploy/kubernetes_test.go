package deploy

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The Kubernetes manifests.

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
					if n == internalPort && slices.Contains(caddyPorts, n) {
						t.Errorf("%s: the internal listener's port %d is a site's too", cwhere, n)
					}
					if !slices.Contains(caddyPorts, n) && n != internalPort {
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
