package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// TestASecondGatewayOnTheSameAddressesRefuses is the README's trial run
// twice: a second gateway started while the first runs, on its data
// directory, its admin endpoint or its listen address, refuses to start
// (exit 1), saying which file or address and which process holds it,
// rather than listening beside the first (Caddy's listeners reuse the
// port, and the kernel would split the connections). The first serves
// throughout, every answer its own; a graceful reload of it still works
// and it keeps serving.
func TestASecondGatewayOnTheSameAddressesRefuses(t *testing.T) {
	first := startGateway(t, gatewayOptions{})
	tok := first.issue("frm_acme", false, "clients:read").Token
	pid := fmt.Sprint(first.proc.cmd.Process.Pid)
	cases := []struct {
		name string
		env  []string
		says *regexp.Regexp
	}{
		{"the same data directory", []string{"PRACTICEGW_DATA=" + first.dataDir},
			regexp.MustCompile(`the data file \S+practicegw\.db is held by process ` + pid + ` \(practicegw\)`)},
		{"the same admin endpoint", []string{"PRACTICEGW_ADMIN=" + first.admin},
			regexp.MustCompile(regexp.QuoteMeta(first.admin) + `, where this gateway listens \(its admin endpoint, or a site\), is answered by process ` + pid)},
		{"the same listen address", []string{"PRACTICEGW_LISTEN=" + first.addr},
			regexp.MustCompile(regexp.QuoteMeta(first.addr) + ` is already answered by process ` + pid + ` \(practicegw\)`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{}, first.env...)
			env = append(env, "PRACTICEGW_LISTEN="+freePort(t), "PRACTICEGW_ADMIN="+freePort(t), "PRACTICEGW_DATA="+t.TempDir())
			env = append(env, tc.env...)
			second := startProcess(t, env, "run", "--config", defaultCaddyfile(), "--adapter", "caddyfile")
			if !second.wait(30 * time.Second) {
				t.Fatalf("the second gateway is still running:\n%s", tail(second.out.String(), 2000))
			}
			if second.err == nil || !tc.says.MatchString(second.out.String()) {
				t.Fatalf("the second gateway ended %v, saying:\n%s", second.err, tail(second.out.String(), 2000))
			}
			// The first answered every request meanwhile, and still does.
			for range 10 {
				if r := first.do(t, "GET", "/v1/clients?limit=1", tok, nil); r.StatusCode != 200 {
					t.Fatalf("the first gateway: %d %s", r.StatusCode, r.body)
				}
				if out, err := first.cli("credential", "list", "--firm", "frm_acme"); err != nil || !strings.Contains(out, "clients:read") {
					t.Fatalf("the first gateway's admin endpoint: %v %s", err, out)
				}
			}
		})
	}

	// A reload of the first is not refused: its sockets are its own.
	if out, err := first.cli("reload", "--config", defaultCaddyfile(), "--adapter", "caddyfile", "--address", first.admin); err != nil {
		t.Fatalf("reload: %v %s", err, out)
	}
	for range 10 {
		if r := first.do(t, "GET", "/v1/clients?limit=1", tok, nil); r.StatusCode != 200 {
			t.Fatalf("after the reload: %d %s", r.StatusCode, r.body)
		}
	}
	if first.proc.exited() || strings.Contains(first.logs.String(), "is already answered") {
		t.Fatalf("the reload was refused:\n%s", tail(first.logs.String(), 2000))
	}
}

// TestSecondVendorDoublesRefuse: practicegw-vendors started twice on the
// same ports refuses the second time, naming the address and the process
// that serves it, on free ports the test chose.
func TestSecondVendorDoublesRefuse(t *testing.T) {
	bin, err := vendorsBinary()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := freeVendorPorts(t)
	args := []string{"--gateway", "http://" + freePort(t), "--state", "", "--port", strconv.Itoa(first)}
	one := startCommand(t, "practicegw-vendors", exec.Command(bin, args...), os.Interrupt)
	eventually.True(t, 30*time.Second, poll, "the doubles to serve", func() bool {
		return strings.Contains(one.out.String(), "Ctrl-C stops them")
	})
	two := startCommand(t, "practicegw-vendors", exec.Command(bin, args...), os.Interrupt)
	if !two.wait(30 * time.Second) {
		t.Fatal("the second practicegw-vendors is still running")
	}
	says := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("127.0.0.1:%d", first)) + ` is already answered by process ` +
		fmt.Sprint(one.cmd.Process.Pid) + ` \(practicegw-vend`)
	if two.err == nil || !says.MatchString(two.out.String()) {
		t.Fatalf("the second practicegw-vendors ended %v, saying:\n%s", two.err, two.out.String())
	}
	if one.exited() {
		t.Fatalf("the first stopped:\n%s", one.out.String())
	}
}
