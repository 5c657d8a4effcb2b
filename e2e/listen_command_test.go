package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// listening is a practicegw listen process.
type listening struct {
	*process
	secret string
}

var secretLine = regexp.MustCompile(`Session signing secret: (whsec_\S+)`)

// startListen runs practicegw listen with token against the gateway at
// url, and waits until it has connected.
func startListen(t *testing.T, url, token string, args ...string) *listening {
	t.Helper()
	l := &listening{process: startProcess(t, append(os.Environ(), "PRACTICEGW_TOKEN="+token), append([]string{"listen", "--url", url}, args...)...)}
	// What a test checks of a listener it has seen; the end of the test
	// has nothing to wait for.
	l.stopSignal = os.Kill
	l.waitFor("connected; waiting for events", 20*time.Second)
	m := secretLine.FindStringSubmatch(l.out.String())
	if m == nil {
		t.Fatalf("no session secret printed:\n%s", l.out.String())
	}
	l.secret = m[1]
	return l
}

// waitFor waits until the output holds s.
func (l *listening) waitFor(s string, within time.Duration) {
	l.t.Helper()
	eventually.NoError(l.t, within, poll, fmt.Sprintf("practicegw listen to print %q", s), func() error {
		if strings.Contains(l.out.String(), s) {
			return nil
		}
		select {
		case <-l.done:
			l.t.Fatalf("practicegw listen exited (%v) before printing %q:\n%s", l.err, s, l.out.String())
		default:
		}
		return fmt.Errorf("it printed:\n%s", l.out.String())
	})
}

// interrupt stops it as Ctrl-C does and expects a clean exit.
func (l *listening) interrupt() {
	l.t.Helper()
	l.signal(os.Interrupt)
	if !l.wait(10 * time.Second) {
		l.t.Fatal("practicegw listen did not stop within 10s of Ctrl-C")
	}
	if l.err != nil || !strings.Contains(l.out.String(), "nothing was registered") {
		l.t.Fatalf("practicegw listen ended with %v:\n%s", l.err, l.out.String())
	}
}

// runListen runs practicegw listen expecting it to give up by itself.
func runListen(t *testing.T, url, token string, args ...string) (string, error) {
	t.Helper()
	p := startProcess(t, append(os.Environ(), "PRACTICEGW_TOKEN="+token), append([]string{"listen", "--url", url}, args...)...)
	if !p.wait(20 * time.Second) {
		p.kill()
		t.Fatalf("practicegw listen %v still running after 20s:\n%s", args, p.out.String())
	}
	return p.out.String(), p.err
}

// trigger raises one sandbox event through the API and returns its id.
func trigger(t *testing.T, g *gateway, token, kind string) string {
	t.Helper()
	r := g.do(t, "POST", "/v1/sandbox/trigger", token, map[string]any{"event": kind})
	if r.StatusCode != 201 {
		t.Fatalf("trigger %s: %d %s", kind, r.StatusCode, r.body)
	}
	return r.json(t)["event_id"].(string)
}

func endpointCount(t *testing.T, g *gateway, token string) int {
	t.Helper()
	r := g.do(t, "GET", "/v1/webhook_endpoints", token, nil)
	if r.StatusCode != 200 {
		t.Fatalf("list endpoints: %d %s", r.StatusCode, r.body)
	}
	return len(r.json(t)["data"].([]any))
}

// ids are the deliveries' event ids, in arrival order.
func ids(ds []delivered) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.id
	}
	return out
}

// received waits until every one of want has arrived, then raises one
// more event with barrier and waits for it: the stream and the listener
// keep record order, so a repeat or a stray event raised before it would
// have arrived before it. It returns every delivery before the barrier's
// and fails on an event that arrived twice.
func received(t *testing.T, rc *receiver, want []string, barrier func() string) []delivered {
	t.Helper()
	waitIDs := func(want []string) (got []delivered) {
		eventually.NoError(t, 15*time.Second, poll, fmt.Sprintf("%v to arrive", want), func() error {
			got = rc.wait(0, 0)
			have := map[string]bool{}
			for _, d := range got {
				have[d.id] = true
			}
			if missing := slices.DeleteFunc(slices.Clone(want), func(id string) bool { return have[id] }); len(missing) > 0 {
				return fmt.Errorf("%v never arrived; got %v", missing, ids(got))
			}
			return nil
		})
		return got
	}
	waitIDs(want)
	last := barrier()
	got := waitIDs([]string{last})
	seen := map[string]bool{}
	for i, d := range got {
		if d.id == last {
			return got[:i]
		}
		if seen[d.id] {
			t.Fatalf("%s arrived twice: %v", d.id, ids(got))
		}
		seen[d.id] = true
	}
	return got
}

func TestListenForwardsSandboxEventsSignedAndRegistersNothing(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", true, "events:read", "webhooks:read", "webhooks:write").Token
	// The listener's own credential may make two requests a minute: a
	// stream is one request however many events it carries.
	listenTok := g.issueWith("frm_acme", true, "2/m", "events:read").Token
	if n := endpointCount(t, g, tok); n != 0 {
		t.Fatalf("%d endpoints before listening", n)
	}
	rc := newReceiver(t)
	l := startListen(t, "http://"+g.addr, listenTok, "--forward-to", rc.url(), "--events", "job.*,invoice.paid")
	rc.setSecrets(l.secret)

	// client.created is not asked for: the job.opened after it shows it
	// was filtered, not late.
	want := []string{trigger(t, g, tok, "job.stage_changed")}
	skipped := trigger(t, g, tok, "client.created")
	want = append(want, trigger(t, g, tok, "invoice.paid"), trigger(t, g, tok, "job.opened"))
	got := received(t, rc, want, func() string { return trigger(t, g, tok, "job.opened") })
	var order []string
	for _, d := range got {
		kind, _ := d.envelope["event"].(string)
		if d.id == skipped || (!strings.HasPrefix(kind, "job.") && kind != "invoice.paid") {
			t.Errorf("forwarded %s (%s), which --events does not ask for", d.id, kind)
		}
		if slices.Contains(want, d.id) {
			order = append(order, d.id)
		}
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("forwarded %v, want them in the order raised: %v", order, want)
	}
	for _, d := range got {
		// The body is the event exactly as the API serves it.
		ev := g.do(t, "GET", "/v1/events/"+d.id, tok, nil)
		if !bytes.Equal(bytes.TrimSpace(ev.body), d.body) {
			t.Errorf("forwarded body of %s differs from the event:\n%s\n%s", d.id, d.body, ev.body)
		}
		if d.envelope["sandbox"] != true || d.envelope["firm"] != "frm_acme" {
			t.Errorf("envelope %v", d.envelope)
		}
		// One line per delivery: event, id, the local status.
		l.waitFor(d.id+"  200 OK", 5*time.Second)
	}
	// Nothing is registered while it runs, nor after.
	if n := endpointCount(t, g, tok); n != 0 {
		t.Fatalf("%d endpoints while listening", n)
	}

	// A receiver that is down costs its events, said so, not the stream.
	rc.srv.Close()
	down := trigger(t, g, tok, "job.opened")
	l.waitFor(down+"  error: ", 10*time.Second)
	l.interrupt()
	if n := endpointCount(t, g, tok); n != 0 {
		t.Fatalf("%d endpoints after listening", n)
	}

	// A gateway shutting down ends its streams rather than waiting on
	// them, and the listener waits for it to come back.
	again := newReceiver(t)
	l = startListen(t, "http://"+g.addr, listenTok, "--forward-to", again.url())
	again.setSecrets(l.secret)
	start := time.Now()
	g.stop()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the gateway took %s to stop with a stream open", took)
	}
	l.waitFor("stream lost", 10*time.Second)
	g.start(defaultCaddyfile())
	l.waitFor("reconnected", 30*time.Second)
	after := trigger(t, g, tok, "invoice.raised")
	if d := again.wait(1, 10*time.Second); d[0].id != after {
		t.Fatalf("after the restart: %v, want %s", ids(d), after)
	}
	l.interrupt()
}

func TestListenRefusals(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	url := "http://" + g.addr
	rc := newReceiver(t)
	liveEvents := g.issue("frm_acme", false, "events:read").Token
	liveBoth := g.issue("frm_acme", false, "events:read", "webhooks:read").Token
	sandbox := g.issue("frm_acme", true, "events:read").Token
	for _, tc := range []struct {
		name, token string
		args        []string
		says        string
	}{
		{"live credential without --live", liveBoth, nil, "live=true"},
		{"live credential without webhooks:read", liveEvents, []string{"--live"}, "webhooks:read"},
		{"sandbox credential with --live", sandbox, []string{"--live"}, "sandbox events only"},
		{"a kind that does not exist", sandbox, []string{"--events", "job.removed"}, "not an event kind"},
		{"a revoked or forged token", "pgw_test_nonsense", nil, "401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runListen(t, url, tc.token, append([]string{"--forward-to", rc.url()}, tc.args...)...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(out, tc.says) {
				t.Fatalf("practicegw listen ended with %v, want a refusal saying %q:\n%s", err, tc.says, out)
			}
		})
	}

	// With --live and both scopes, live events arrive.
	l := startListen(t, url, liveBoth, "--forward-to", rc.url(), "--live")
	rc.setSecrets(l.secret)
	writer := g.issue("frm_acme", false, allReadWrite...).Token
	job := g.do(t, "GET", "/v1/jobs?stage=in_progress&limit=1", writer, nil).json(t)["data"].([]any)[0].(map[string]any)
	g.do(t, "POST", "/v1/jobs/"+job["id"].(string)+"/stage", writer, map[string]any{"stage": "in_review"})
	d := rc.wait(1, 10*time.Second)[0]
	if d.envelope["event"] != "job.stage_changed" || d.envelope["sandbox"] != false {
		t.Fatalf("live stream forwarded %v", d.envelope)
	}
	l.interrupt()
}

// balancer is a TCP load balancer in front of gateway instances: it sends
// new connections to its current target, can cut the connections it
// holds, and can refuse new ones.
type balancer struct {
	ln     net.Listener
	target atomic.Value // string; "" refuses
	mu     sync.Mutex
	conns  []net.Conn
}

func newBalancer(t *testing.T, target string) *balancer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln}
	b.target.Store(target)
	t.Cleanup(func() { ln.Close(); b.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	return b
}

func (b *balancer) serve(c net.Conn) {
	target := b.target.Load().(string)
	if target == "" {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	b.mu.Lock()
	b.conns = append(b.conns, c, up)
	b.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// cut closes every connection it holds, as a balancer restarting or an
// instance going away would.
func (b *balancer) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
}

func (b *balancer) url() string { return "http://" + b.ln.Addr().String() }

func TestListenThroughTwoInstancesResumesWithoutLossOrRepeat(t *testing.T) {
	_, a, b := twoGateways(t)
	tok := a.issue("frm_acme", true, "events:read", "webhooks:read", "webhooks:write").Token
	lb := newBalancer(t, b.addr)
	rc := newReceiver(t)
	l := startListen(t, lb.url(), tok, "--forward-to", rc.url())
	rc.setSecrets(l.secret)

	// Raised on A, streamed from B.
	first := trigger(t, a, tok, "job.opened")
	if got := rc.wait(1, 10*time.Second); got[0].id != first {
		t.Fatalf("through B: %v, want %s", ids(got), first)
	}

	// B's connection goes; while none can be made, events are raised on
	// both instances and recorded; then the balancer sends the listener to
	// A, where it resumes after the last event it had.
	lb.target.Store("")
	lb.cut()
	l.waitFor("stream lost", 10*time.Second)
	var missed []string
	for i, kind := range []string{"invoice.paid", "job.stage_changed", "client.updated", "document.filed"} {
		g := a
		if i%2 == 1 {
			g = b
		}
		missed = append(missed, trigger(t, g, tok, kind))
	}
	eventually.True(t, 10*time.Second, poll, "the events to be recorded", func() bool {
		for _, id := range missed {
			if a.do(t, "GET", "/v1/events/"+id, tok, nil).StatusCode != 200 {
				return false
			}
		}
		return true
	})
	lb.target.Store(a.addr)
	l.waitFor("reconnected", 30*time.Second)
	last := trigger(t, b, tok, "job.opened")
	// Each once (received checks), the first not again.
	if got := received(t, rc, append(append([]string{first}, missed...), last),
		func() string { return trigger(t, b, tok, "job.opened") }); got[0].id != first {
		t.Fatalf("forwarded %v", ids(got))
	}
	if n := endpointCount(t, a, tok); n != 0 {
		t.Fatalf("%d endpoints registered", n)
	}
	l.interrupt()
}
