package redistest

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

func TestLifecycle(t *testing.T) {
	s := Start(t, WithAOF())
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/0") {
		t.Fatalf("URL() = %q", s.URL())
	}
	if got := do(t, s.Addr(), "SET k v"); got != "+OK" {
		t.Fatalf("SET answered %q", got)
	}

	s.Kill()
	if ping(s.Addr(), nil) == nil {
		t.Fatal("server still answers after Kill")
	}

	s.Restart()
	addr := s.Addr()
	if err := ping(addr, nil); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	// Stop (SIGTERM) flushes the AOF; the value must survive a second restart.
	do(t, addr, "SET k w")
	s.Stop()
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, s.Addr())
	}
	if got := do(t, addr, "GET k"); got != "$1" {
		t.Fatalf("GET after restart with AOF answered %q, want the value back", got)
	}
}

// do sends one inline command and returns the first line of the answer.
func do(t *testing.T, addr, cmd string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	conn.Write([]byte(cmd + "\r\n"))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

func TestTLS(t *testing.T) {
	s := Start(t, WithTLS())
	if !strings.HasPrefix(s.URL(), "rediss://127.0.0.1:") {
		t.Fatalf("URL() = %q", s.URL())
	}
	cfg, err := s.TLS().clientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr(), cfg); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if ping(s.Addr(), nil) == nil {
		t.Error("the server answers in plain text")
	}
	noCert := cfg.Clone()
	noCert.Certificates = nil
	if ping(s.Addr(), noCert) == nil {
		t.Error("the server answers a client without a certificate")
	}
	s.Restart()
	if err := ping(s.Addr(), cfg); err != nil {
		t.Fatalf("PING over TLS after Restart: %v", err)
	}
}
