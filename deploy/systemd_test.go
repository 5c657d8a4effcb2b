package deploy

import (
	"path"
	"slices"
	"strings"
	"testing"
)

// The systemd units.

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
