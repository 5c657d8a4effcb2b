//go:build unix

package occupant

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// reusePort listens as Caddy does, so that two processes may.
var reusePort = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
	if err != nil {
		return err
	}
	return serr
}}

// TestMain doubles as the other process: with OCCUPANT_HOLD set it
// listens on a free port and locks the file named, says the port, and
// waits for its input to close.
func TestMain(m *testing.M) {
	if path := os.Getenv("OCCUPANT_HOLD"); path != "" {
		ln, err := reusePort.Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(2)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil || syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			os.Exit(3)
		}
		fmt.Println(ln.Addr().String())
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Another process that listens on an address, or locks a file, is found
// and named; this process's own listener and lock are no one else's.
func TestFindsAnotherProcessNotThisOne(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("occupants are read from Linux's /proc")
	}
	path := filepath.Join(t.TempDir(), "practicegw.db")
	other := exec.Command(os.Args[0], "-test.run=^$")
	other.Env = append(os.Environ(), "OCCUPANT_HOLD="+path)
	stdin, _ := other.StdinPipe()
	stdout, _ := other.StdoutPipe()
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); other.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr = strings.TrimSpace(addr)
	_, port, _ := net.SplitHostPort(addr)
	for _, a := range []string{addr, ":" + port, "0.0.0.0:" + port, "localhost:" + port} {
		ps, err := Listening(a)
		if err != nil || len(ps) != 1 || ps[0].PID != other.Process.Pid || !strings.Contains(ps[0].String(), "occupant.test") {
			t.Errorf("listening on %s: %v %v, want process %d", a, ps, err, other.Process.Pid)
		}
	}
	if ps, err := Listening("127.0.0.2:" + port); err != nil || len(ps) != 0 {
		t.Errorf("another address on the port: %v %v", ps, err)
	}
	// This process listening beside it is a conflict of this process's.
	beside, err := reusePort.Listen(context.Background(), "tcp", ":"+port)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Beside()
	beside.Close()
	if err != nil || len(cs) != 1 || !strings.HasSuffix(cs[0].Addr, ":"+port) || len(cs[0].By) != 1 || cs[0].By[0].PID != other.Process.Pid {
		t.Errorf("listening beside it: %+v %v", cs, err)
	}
	if ps, err := Locking(path); err != nil || len(ps) != 1 || ps[0].PID != other.Process.Pid {
		t.Errorf("the lock: %v %v, want process %d", ps, err, other.Process.Pid)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ps, err := Listening(ln.Addr().String()); err != nil || len(ps) != 0 {
		t.Errorf("this process's own listener: %v %v", ps, err)
	}
	mine := filepath.Join(t.TempDir(), "mine.db")
	f, _ := os.Create(mine)
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if ps, err := Locking(mine); err != nil || len(ps) != 0 {
		t.Errorf("this process's own lock: %v %v", ps, err)
	}
	if ps, err := Locking(filepath.Join(t.TempDir(), "none.db")); err != nil || len(ps) != 0 {
		t.Errorf("a file not there: %v %v", ps, err)
	}
}
