// Package redistest runs a real redis-server for tests: one per call to
// Start, on a free loopback port, with its files in the test's temp dir and
// gone when the test ends. Tests that need Redis to vanish and come back
// use Kill, Stop and Restart; the port stays the same, so clients that hold
// the URL reconnect on their own. WithTLS makes a server that speaks TLS
// alone, with certificates made for it.
//
// Without redis-server on PATH a test is skipped locally and fails in CI
// (env CI set), so a CI image that lost Redis cannot pass by skipping.
package redistest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a redis-server may take to answer PING.
const startTimeout = 5 * time.Second

// Server is one redis-server process owned by a test.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	aof  bool
	tls  bool
	// files, with WithTLS, are the certificates made for this server.
	files *TLSFiles

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Option changes how the server runs.
type Option func(*Server)

// WithAOF turns on the append-only file (fsync every second), so data
// written before Stop or Kill is there again after Restart.
func WithAOF() Option { return func(s *Server) { s.aof = true } }

// Start runs a redis-server and waits until it answers PING. It is stopped
// when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not on PATH; run the tests with the README's test command, which installs it"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	for _, o := range opts {
		o(s)
	}
	t.Cleanup(func() { s.signal(syscall.SIGKILL) })
	if s.tls {
		files, err := makeTLSFiles(s.dir)
		if err != nil {
			t.Fatalf("redistest: making TLS certificates: %v", err)
		}
		s.files = files
	}

	// A free port can be taken between picking and binding; a few tries
	// make that race harmless.
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		err := s.start()
		if err == nil {
			return s
		}
		if attempt == 2 {
			t.Fatalf("redistest: %v", err)
		}
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL, database 0; rediss:// WithTLS.
func (s *Server) URL() string {
	if s.files != nil {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// Kill ends the server with SIGKILL, as a crash or a pulled cable would:
// open connections break without a goodbye.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop ends the server with SIGTERM and waits for it to exit.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Restart stops the server if it runs and starts it again on the same port
// and directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

func (s *Server) start() error {
	args := []string{"--port", strconv.Itoa(s.port)}
	if s.files != nil {
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", s.files.serverCert, "--tls-key-file", s.files.serverKey,
			"--tls-ca-cert-file", s.files.CA}
	}
	args = append(args,
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
	)
	if s.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	logPath := filepath.Join(s.dir, "redis.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logFile.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	var tlsCfg *tls.Config
	if s.files != nil {
		if tlsCfg, err = s.files.clientConfig(); err != nil {
			s.signal(syscall.SIGKILL)
			return err
		}
	}

	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited at start: %s", tail(logPath))
		default:
		}
		if ping(s.Addr(), tlsCfg) == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.signal(syscall.SIGKILL)
	return fmt.Errorf("redis-server did not answer PING within %v: %s", startTimeout, tail(logPath))
}

// signal sends sig to a running server and waits for it to exit.
func (s *Server) signal(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
	default:
		s.cmd.Process.Signal(sig)
		<-s.done
	}
	s.cmd = nil
}

// ping speaks just enough RESP to learn whether the server is ready, so the
// harness needs no Redis client; over TLS when tlsCfg is set.
func ping(addr string, tlsCfg *tls.Config) error {
	dialer := &net.Dialer{Timeout: 100 * time.Millisecond}
	var conn net.Conn
	var err error
	if tlsCfg != nil {
		conn, err = tls.DialWithDialer(dialer, "tcp", addr, tlsCfg)
	} else {
		conn, err = dialer.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tail returns the end of the server's log for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
