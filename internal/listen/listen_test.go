package listen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct{ addr, bind, port string }{
		{"", "", "8080"},
		{" ", "", "8080"},
		{":8080", "", "8080"},
		{"8080", "", "8080"},
		{"127.0.0.1:9000", "127.0.0.1", "9000"},
		{"10.1.2.3:80", "10.1.2.3", "80"},
		{"[::1]:8080", "::1", "8080"},
		{"[fe80::1%eth0]:8080", "fe80::1%eth0", "8080"},
		{"localhost:8080", "localhost", "8080"},
		{"0.0.0.0:8080", "tcp4/0.0.0.0", "8080"},
		{"[::]:8080", "tcp6/::", "8080"},
	} {
		bind, port, err := Split(c.addr)
		if err != nil || bind != c.bind || port != c.port {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q", c.addr, bind, port, err, c.bind, c.port)
		}
	}
	for _, bad := range []string{"127.0.0.1", "localhost", ":http", ":0", ":65536", "::1:8080", "unix//run/practicegw.sock", "tcp4/127.0.0.1:80", "a b:80", "http://127.0.0.1:8080"} {
		if bind, port, err := Split(bad); err == nil || !strings.Contains(err.Error(), Var) {
			t.Errorf("Split(%q) = %q, %q, %v; want an error naming %s", bad, bind, port, err, Var)
		}
	}
}

func TestExport(t *testing.T) {
	t.Setenv(HostVar, "stale")
	t.Setenv(PortVar, "1")
	t.Setenv(Var, "127.0.0.1:9000")
	if err := Export(nil); err != nil {
		t.Fatal(err)
	}
	if h, p := os.Getenv(HostVar), os.Getenv(PortVar); h != "127.0.0.1" || p != "9000" {
		t.Errorf("exported %s=%q %s=%q; want 127.0.0.1 and 9000", HostVar, h, PortVar, p)
	}
	t.Setenv(Var, "nonsense")
	if err := Export(nil); err == nil {
		t.Error("Export took a listen address without a port")
	}
}

// Caddy reads --envfile after practicegw splits the address, so Export
// reads PRACTICEGW_LISTEN from those files itself; the environment wins
// over them, as in Caddy.
func TestExportFromEnvFile(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.env")
	env := filepath.Join(dir, "practicegw.env")
	os.WriteFile(other, []byte("# nothing about listening\nPRACTICEGW_DATA=/data\n"), 0o600)
	os.WriteFile(env, []byte("export PRACTICEGW_LISTEN=\"127.0.0.1:9100\" # loopback only\n"), 0o600)
	t.Setenv(Var, "")
	os.Unsetenv(Var)
	if err := Export([]string{"run", "--envfile", other, "--envfile=" + env}); err != nil {
		t.Fatal(err)
	}
	if h, p := os.Getenv(HostVar), os.Getenv(PortVar); h != "127.0.0.1" || p != "9100" {
		t.Errorf("from --envfile: %s=%q %s=%q; want 127.0.0.1 and 9100", HostVar, h, PortVar, p)
	}
	t.Setenv(Var, ":9200")
	if err := Export([]string{"run", "--envfile", env}); err != nil {
		t.Fatal(err)
	}
	if h, p := os.Getenv(HostVar), os.Getenv(PortVar); h != "" || p != "9200" {
		t.Errorf("environment and --envfile: %s=%q %s=%q; want the environment's", HostVar, h, PortVar, p)
	}
	if err := Export([]string{"run", "--envfile", filepath.Join(dir, "missing.env")}); err != nil {
		t.Errorf("the environment sets it, so a missing file is Caddy's to report: %v", err)
	}
}

func TestURL(t *testing.T) {
	for addr, want := range map[string]string{
		"": "http://localhost:8080", ":9090": "http://localhost:9090", "9090": "http://localhost:9090",
		"127.0.0.1:8081": "http://127.0.0.1:8081", "[::1]:8080": "http://[::1]:8080", "0.0.0.0:8080": "http://localhost:8080",
		"[::]:8080": "http://localhost:8080", "gw.internal:80": "http://gw.internal:80",
	} {
		if got, err := URL(addr); err != nil || got != want {
			t.Errorf("URL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := URL("x:y"); err == nil {
		t.Error("URL of a bad address succeeded")
	}
}
