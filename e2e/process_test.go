package e2e

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// process is one run of the practicegw binary: a gateway, a dispatcher, a
// listener, or a command expected to end by itself. Every test starts the
// binary through startProcess, so its output is kept, its exit is awaited
// in one goroutine, and the end of the test stops it the same way.
type process struct {
	t    testing.TB
	name string // "practicegw run", for messages
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed once it has exited, with err its exit
	err  error

	// stopSignal is what stop sends first: SIGTERM, as systemd and
	// Kubernetes do, unless a test has nothing to wait for.
	stopSignal os.Signal
}

// stopGrace is how long stop waits after stopSignal before it kills.
const stopGrace = 20 * time.Second

// startProcess runs the binary with args in env, and stops it at the end
// of the test, showing the end of its output if the test failed.
func startProcess(t testing.TB, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	return startCommand(t, "practicegw "+args[0], cmd, syscall.SIGTERM)
}

// startCommand runs another command the same way (a shell line of the
// README, practicegw-vendors), stopped at the end of the test with stop.
func startCommand(t testing.TB, name string, cmd *exec.Cmd, stop os.Signal) *process {
	t.Helper()
	p := &process{t: t, name: name, cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{}), stopSignal: stop}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	return p
}

// needChromium skips a browser test where Chromium is missing, and fails
// it in CI.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: run `make test`, which installs it", chromiumPath)
		}
		t.Skipf("%s is missing (run `make test`, which installs it)", chromiumPath)
	}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait reports whether the process ends within d.
func (p *process) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// signal sends sig, as an operator or a supervisor would.
func (p *process) signal(sig os.Signal) { p.cmd.Process.Signal(sig) }

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *process) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to end with stopSignal and kills it if it has not
// after stopGrace. A process that has already ended is left as it is.
func (p *process) stop() {
	if p.exited() {
		return
	}
	p.signal(p.stopSignal)
	if !p.wait(stopGrace) {
		p.kill()
	}
	if p.t.Failed() {
		p.t.Logf("%s printed:\n%s", p.name, tail(p.out.String(), 4000))
	}
}
