package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The image the Dockerfile builds.

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
