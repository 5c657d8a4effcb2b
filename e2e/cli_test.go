package e2e

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The binary's command line is practicegw's: its help introduces
// practicegw and lists its own commands first, every command's usage line
// says practicegw, version names practicegw and the Caddy beneath, and
// nothing that would swap the binary for a stock Caddy is offered.
func TestCommandLineIsPracticegws(t *testing.T) {
	run := func(args ...string) (string, error) {
		out, err := exec.Command(binary, args...).CombinedOutput()
		return string(out), err
	}
	help, err := run("--help")
	if err != nil {
		t.Fatalf("practicegw --help: %v\n%s", err, help)
	}
	if !strings.HasPrefix(help, "practicegw puts one") || strings.Contains(help, "Caddy is an extensible server platform") {
		t.Errorf("--help does not introduce practicegw:\n%s", help)
	}
	own, server := strings.Index(help, "practicegw's commands:"), strings.Index(help, "Caddy's commands")
	if own < 0 || server < own {
		t.Fatalf("--help lists practicegw's commands at %d, Caddy's at %d:\n%s", own, server, help)
	}
	listed := regexp.MustCompile(`(?m)^  ([a-z][a-z-]+) +[A-Z]`).FindAllStringSubmatchIndex(help, -1)
	var commands []string
	for _, m := range listed {
		name := help[m[2]:m[3]]
		commands = append(commands, name)
		switch name {
		case "credential", "connect", "sync", "listen", "trigger", "dispatcher":
			if m[0] > server {
				t.Errorf("%s is listed among Caddy's commands", name)
			}
		case "upgrade", "add-package", "remove-package":
			t.Errorf("--help offers %s", name)
		}
	}
	for _, want := range []string{"run", "start", "stop", "reload", "adapt", "validate", "fmt", "list-modules", "environ", "trust", "untrust", "version"} {
		if !strings.Contains(" "+strings.Join(commands, " ")+" ", " "+want+" ") {
			t.Errorf("--help lists %v, without %s", commands, want)
		}
	}
	for _, name := range commands {
		out, err := run(name, "--help")
		if err != nil {
			t.Errorf("practicegw %s --help: %v", name, err)
			continue
		}
		for _, line := range regexp.MustCompile(`(?m)^Usage:\n((?:  .*\n)+)`).FindAllStringSubmatch(out, -1) {
			for _, l := range strings.Split(strings.TrimRight(line[1], "\n"), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "practicegw ") {
					t.Errorf("practicegw %s --help has the usage line %q", name, l)
				}
			}
		}
		if strings.Contains(out, "caddy "+name) {
			t.Errorf("practicegw %s --help names the caddy binary:\n%s", name, out)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := run(args...)
		if err != nil || !regexp.MustCompile(`^practicegw \S.*\nCaddy v2\.\d+\.\d+\n$`).MatchString(out) {
			t.Errorf("practicegw %v: %v: %q, want practicegw's version, then Caddy's", args, err, out)
		}
	}
	for _, name := range []string{"upgrade", "add-package", "remove-package"} {
		if out, err := run(name); err == nil || !strings.Contains(out, `unknown command "`+name+`" for "practicegw"`) {
			t.Errorf("practicegw %s: %v: %s", name, err, out)
		}
	}
}
