package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// cliRun is a practicegw subcommand running against a gateway, its output
// read line by line as it prints.
type cliRun struct {
	cmd    *exec.Cmd
	lines  chan string
	out    lockedBuffer
	stderr bytes.Buffer
	done   chan error
}

// cliStart starts a practicegw subcommand against g's admin endpoint,
// with stdin as its standard input; it is killed if the test ends first.
func (g *gateway) cliStart(t *testing.T, stdin io.Reader, args ...string) *cliRun {
	t.Helper()
	r := &cliRun{cmd: exec.Command(binary, args...), lines: make(chan string, 100), done: make(chan error, 1)}
	r.cmd.Env, r.cmd.Stdin, r.cmd.Stderr = g.env, stdin, &r.stderr
	pipe, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			r.out.Write([]byte(sc.Text() + "\n"))
			r.lines <- sc.Text()
		}
		close(r.lines)
		r.done <- r.cmd.Wait()
	}()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
		}
	})
	return r
}

// await reads lines until one matches re, within d.
func (r *cliRun) await(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("the command ended before printing %s: %s%s", re, r.out.String(), r.stderr.String())
			}
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %s within %s: %s", re, d, r.out.String())
		}
	}
}

// wait waits for the command to exit, within d, and returns its error.
func (r *cliRun) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	for range r.lines {
	}
	select {
	case err := <-r.done:
		return err
	case <-time.After(d):
		t.Fatalf("the command did not exit within %s: %s", d, r.out.String())
		return nil
	}
}

// TestConnectFromTheTerminal is issue 26's `practicegw connect` against a
// gateway whose firm has only a name: the command prints the vendor's
// consent page, waits while the operator allows it there, then prints the
// organisation connected and exits 0; the gateway serves its invoices.
// Karbon's access key read from standard input connects at once; a wrong
// one makes the command fail without printing it. Neither the command nor
// the gateway shows a token, code, state or key.
func TestConnectFromTheTerminal(t *testing.T) {
	addr := freePort(t)
	f := startConnectFirm(t, addr)
	g := f.gateway(t, addr)

	redirect, printed := connectXeroByCLI(t, g, f)
	tok := g.issue("frm_hollis", false, "invoices:read").Token
	waitInvoices(t, g, tok, 30)

	wrong := "wrong-" + randomHex(12)
	out, err := g.cliWithInput(strings.NewReader(wrong+"\n"), "connect", "--firm", "frm_hollis", "--role", "records", "--system", "karbon", "--access-key", "-")
	if err == nil || strings.Contains(out+err.Error(), wrong) || !strings.Contains(err.Error(), "refused this access key") {
		t.Fatalf("a wrong access key: %v: %s", err, out)
	}
	out, err = g.cliWithInput(strings.NewReader(f.k.AccessKey+"\n"), "connect", "--firm", "frm_hollis", "--role", "records", "--system", "karbon", "--access-key", "-")
	if err != nil || !strings.Contains(out, "Karbon is connected for frm_hollis as records") {
		t.Fatalf("the access key: %v: %s", err, out)
	}
	keys := subscribedOnce(t, f.k, 5*time.Second)
	invoicesResolve(t, g)

	secrets := append(f.x.Identity.Issued(), redirect.Query().Get("code"), redirect.Query().Get("state"), wrong, f.k.AccessKey,
		f.x.Identity.ClientSecret, f.k.Bearer)
	noSecrets(t, map[string]string{"the gateway's logs": g.logs.String(), "the command's output": printed + out,
		"the metrics": metrics(t, g)}, append(secrets, keys...))
}

// connectXeroByCLI runs `practicegw connect` for the firm's ledger on g:
// it prints the consent page, which the operator allows at the double
// (the browser then follows the redirect to g's callback), and the
// command then prints the organisation connected and exits 0. It returns
// the redirect and what the command printed, less the consent page.
func connectXeroByCLI(t *testing.T, g *gateway, f *connectFirm) (redirect *url.URL, printed string) {
	t.Helper()
	run := g.cliStart(t, nil, "connect", "--firm", "frm_hollis", "--role", "ledger", "--system", "xero")
	page := run.await(t, regexp.MustCompile(`^\s+(http://\S+/connect/start/\S+)$`), 10*time.Second)[1]
	br := newConsentBrowser(t)
	redirect = consent(t, f.x, br, page)
	if r := br.callback(t, g, redirect, "Accept", "text/html"); r.StatusCode != 200 ||
		!strings.Contains(string(r.body), "Demo Company (UK)") {
		t.Fatalf("the callback page: %d %s", r.StatusCode, r.body)
	}
	if err := run.wait(t, 10*time.Second); err != nil {
		t.Fatalf("%v: %s%s", err, run.out.String(), run.stderr.String())
	}
	out := run.out.String()
	if !regexp.MustCompile(`Xero is connected for frm_hollis as ledger \(con_\w+\): Demo Company \(UK\)\.`).MatchString(out) {
		t.Fatalf("the command printed:\n%s", out)
	}
	return redirect, withoutLine(out, page)
}

// invoicesResolve waits until the connected ledger's invoices, read
// before the records system was connected, name its clients: every
// client an invoice names answers 200 with the same credential, or is
// null, and those the Karbon double holds Xero's contact ids for are
// linked; `practicegw sync status` counts the rest.
func invoicesResolve(t *testing.T, g *gateway) {
	t.Helper()
	tok := g.issue("frm_hollis", false, "invoices:read", "clients:read").Token
	defer func() {
		if t.Failed() {
			for _, line := range strings.Split(g.logs.String(), "\n") {
				if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
					t.Log(line)
				}
			}
		}
	}()
	// Karbon's backfill shares its budget with the lookups of Xero's
	// contacts: a client not copied yet may answer 503 until it is.
	// Each client answered 200 is not asked again: the credential's own
	// ceiling holds.
	answered := map[string]bool{}
	eventually.NoError(t, 4*time.Minute, 2*time.Second, "invoices naming Karbon's clients", func() error {
		r := g.do(t, "GET", "/v1/invoices?limit=100", tok, nil)
		var page struct {
			Data []struct {
				ID     string  `json:"id"`
				Client *string `json:"client"`
			} `json:"data"`
		}
		if r.StatusCode != 200 || json.Unmarshal(r.body, &page) != nil || len(page.Data) == 0 {
			return fmt.Errorf("%d %s", r.StatusCode, tail(string(r.body), 300))
		}
		linked := 0
		for _, inv := range page.Data {
			if inv.Client == nil {
				continue
			}
			linked++
			if answered[*inv.Client] {
				continue
			}
			if c := g.do(t, "GET", "/v1/clients/"+*inv.Client, tok, nil); c.StatusCode != 200 {
				return fmt.Errorf("%s names %s: %d", inv.ID, *inv.Client, c.StatusCode)
			}
			answered[*inv.Client] = true
		}
		if linked == 0 {
			return fmt.Errorf("no invoice names a client: %s", tail(string(r.body), 300))
		}
		return nil
	})
	status, err := g.cli("sync", "status", "--firm", "frm_hollis")
	if err != nil || !regexp.MustCompile(`\d+ of \d+ Xero contacts match no Karbon client`).MatchString(status) {
		t.Fatalf("sync status: %v\n%s", err, status)
	}
}

// waitInvoices waits until g serves n invoices.
func waitInvoices(t *testing.T, g *gateway, tok string, n int) {
	t.Helper()
	eventually.NoError(t, 30*time.Second, 20*time.Millisecond, fmt.Sprintf("%d invoices", n), func() error {
		r := g.do(t, "GET", "/v1/invoices?limit=100", tok, nil)
		if got := strings.Count(string(r.body), `"INV-`); r.StatusCode != 200 || got != n {
			return fmt.Errorf("%d, %d invoices: %s", r.StatusCode, got, tail(string(r.body), 300))
		}
		return nil
	})
}

// withoutLine is out less the line holding s: the consent page the
// command prints carries the state to the vendor, its one place.
func withoutLine(out, s string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, s) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// cliWithInput runs a practicegw subcommand to its end with stdin as its
// standard input.
func (g *gateway) cliWithInput(stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env, cmd.Stdin = g.env, stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("practicegw %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}
