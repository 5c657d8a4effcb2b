package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// captured is a request one instance forwarded to another, as it crossed
// the network between them.
type captured struct {
	method, uri string
	header      http.Header
	body        []byte
}

// wire sits between the instances as an attacker on their network would:
// it passes each forwarded request on to the holder's internal listener,
// keeping a copy, and can hold one until told to let it go.
type wire struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []captured
	hold chan chan struct{} // set: the next request waits on a channel sent here
}

func newWire(t *testing.T, to string) *wire {
	w := &wire{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.seen = append(w.seen, captured{method: r.Method, uri: r.URL.RequestURI(), header: r.Header.Clone(), body: body})
		hold := w.hold
		w.hold = nil
		w.mu.Unlock()
		if hold != nil {
			release := make(chan struct{})
			hold <- release
			<-release
		}
		resp, err := sendCaptured(to, captured{method: r.Method, uri: r.URL.RequestURI(), header: r.Header, body: body})
		if err != nil {
			rw.WriteHeader(http.StatusBadGateway)
			return
		}
		for k, v := range resp.Header {
			rw.Header()[k] = v
		}
		rw.WriteHeader(resp.StatusCode)
		rw.Write(resp.body)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *wire) last(t *testing.T, method string) captured {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.seen) - 1; i >= 0; i-- {
		if w.seen[i].method == method {
			return w.seen[i]
		}
	}
	t.Fatalf("no %s crossed the wire", method)
	return captured{}
}

// holdNext makes the next request wait; the channel answers the one that
// lets it go.
func (w *wire) holdNext() chan chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = make(chan chan struct{}, 1)
	return w.hold
}

// sendCaptured sends c to the instance at addr (host:port), as captured.
func sendCaptured(addr string, c captured) (response, error) {
	req, err := http.NewRequest(c.method, "http://"+addr+c.uri, bytes.NewReader(c.body))
	if err != nil {
		return response{}, err
	}
	req.Header = c.header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{Response: resp, body: b}, err
}

// refused reads a counter of forwarded requests refused for reason.
func refused(t *testing.T, g *gateway, reason string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^practicegw_read_model_forwards_refused_total\{reason="` + reason + `"\} (\S+)$`).FindStringSubmatch(metrics(t, g))
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestForwardedRequestsAreTakenOnceFromAnInstance is the attack of issue
// 41 through the real binary, on two gateways and Redis: what one
// instance forwards to the other is captured on the network between them
// and sent again. Replayed as captured, to the holder, to the other
// instance or through the address the holder advertises, it is refused
// (401, the nonce taken); with a header changed, refused (401, the
// signature); sent to either public site, 404; one held on the wire while
// its credential is revoked and then let go within its few seconds,
// refused by the holder (401, as practicegw_auth refuses it). Each
// refusal is counted by why and logged without a word of the header, and
// the vendor is written to once. An outside client reaches no internal
// route on a public address. A forwarded request is charged once, and
// written once in the access log, on the instance its client called.
func TestForwardedRequestsAreTakenOnceFromAnInstance(t *testing.T) {
	c := newBoundedCluster(t)
	a := c.start("PRACTICEGW_READ_MODEL_REPLICAS=1")
	internalB := freePort(t)
	w := newWire(t, internalB)
	b := c.startAt(internalB, w.srv.URL, "PRACTICEGW_READ_MODEL_REPLICAS=1")
	var firm string
	eventually.NoError(t, 30*time.Second, 50*time.Millisecond, "a firm held by b alone", func() error {
		for _, f := range boundedFirms {
			if held := heldBy(t, a, f); len(held) == 1 && held[0] == b.advertise {
				firm = f
				return nil
			}
		}
		return fmt.Errorf("no firm is held by %s alone", b.advertise)
	})
	cred := a.issueWith(firm, false, "100/s", allReadWrite...)
	eventually.NoError(t, 60*time.Second, 100*time.Millisecond, firm+" backfilled", func() error {
		if r := a.do(t, "GET", "/v1/clients?limit=1", cred.Token, nil); r.StatusCode != 200 || r.Header.Get("Data-State") != "live" {
			return fmt.Errorf("%d %s", r.StatusCode, r.Header.Get("Data-State"))
		}
		return nil
	})
	writes := func() int {
		n := 0
		for _, r := range c.k.Requests() {
			if !strings.HasPrefix(r, "GET ") && strings.Contains(r, "/v3/Contacts/C007") {
				n++
			}
		}
		return n
	}

	// The write a client sends a, forwarded to b: answered, and captured.
	path := "/v1/clients/cli_c-C007"
	r := a.do(t, "PATCH", path, cred.Token, map[string]any{"name": "Ann Forwarded"}, "Idempotency-Key", "k1")
	if r.StatusCode != 200 {
		t.Fatalf("a write forwarded to its holder: %d %s", r.StatusCode, r.body)
	}
	capture := w.last(t, "PATCH")
	if capture.header.Get("Authorization") != "" || capture.header.Get("Practicegw-Forwarded") == "" {
		t.Fatalf("what crossed the wire: %v", capture.header)
	}
	sent := writes()
	before := map[string]float64{}
	for _, reason := range []string{"replayed", "forged", "credential"} {
		before[reason] = refused(t, a, reason) + refused(t, b, reason)
	}

	// Replayed as captured: to the holder, to the other instance, and
	// through the address the holder advertises.
	for _, to := range []string{b.internal, a.internal, strings.TrimPrefix(w.srv.URL, "http://")} {
		got, err := sendCaptured(to, capture)
		if err != nil || got.StatusCode != http.StatusUnauthorized || got.errorCode(t) != "unauthenticated" {
			t.Errorf("replayed to %s: %v %d %s", to, err, got.StatusCode, got.body)
		}
	}
	// With a header the holder acts on changed, or added.
	for name, value := range map[string]string{"Idempotency-Key": "k2", "Content-Type": "text/plain", "If-Match": `"1"`} {
		changed := capture
		changed.header = capture.header.Clone()
		changed.header.Set(name, value)
		got, err := sendCaptured(b.internal, changed)
		if err != nil || got.StatusCode != http.StatusUnauthorized {
			t.Errorf("with %s changed: %v %d %s", name, err, got.StatusCode, got.body)
		}
	}
	// Sent to the public sites: no route of theirs.
	for _, g := range []*gateway{a, b} {
		got, err := sendCaptured(g.addr, capture)
		if err != nil || got.StatusCode != http.StatusNotFound || got.errorCode(t) != "resource_not_found" {
			t.Errorf("sent to %s's public site: %v %d %s", g.addr, err, got.StatusCode, got.body)
		}
		if got := g.do(t, "GET", "/_practicegw/forwarded/v1/clients", cred.Token, nil); got.StatusCode != http.StatusNotFound {
			t.Errorf("an outside client at %s's public site: %d %s", g.addr, got.StatusCode, got.body)
		}
	}

	// Held on the wire while its credential is revoked, then let go
	// within its few seconds: the holder asks its registry.
	hold := w.holdNext()
	answered := make(chan response, 1)
	go func() {
		answered <- a.do(t, "PATCH", path, cred.Token, map[string]any{"name": "Ann Revoked"}, "Idempotency-Key", "k3")
	}()
	var release chan struct{}
	select {
	case release = <-hold:
	case <-time.After(10 * time.Second):
		t.Fatal("the write was not forwarded")
	}
	if out, err := b.cli("credential", "revoke", cred.ID); err != nil {
		t.Fatalf("revoke: %v %s", err, out)
	}
	close(release)
	if got := <-answered; got.StatusCode != http.StatusUnauthorized || got.errorCode(t) != "unauthenticated" {
		t.Errorf("a forwarded write whose credential was revoked on the way: %d %s", got.StatusCode, got.body)
	}

	if n := writes(); n != sent {
		t.Errorf("Karbon was written to %d times by the attacks", n-sent)
	}
	after := map[string]float64{}
	for _, reason := range []string{"replayed", "forged", "credential"} {
		after[reason] = refused(t, a, reason) + refused(t, b, reason)
	}
	if after["replayed"]-before["replayed"] < 3 || after["forged"]-before["forged"] < 3 || after["credential"]-before["credential"] < 1 {
		t.Errorf("refusals counted before %v, after %v", before, after)
	}
	logs := a.logs.String() + b.logs.String()
	if strings.Count(logs, "forwarded request refused") < 7 {
		t.Errorf("%d refusals logged, want each", strings.Count(logs, "forwarded request refused"))
	}
	for _, part := range strings.Split(capture.header.Get("Practicegw-Forwarded"), ".")[2:] {
		if strings.Contains(logs, part) {
			t.Errorf("a log line holds the forwarded header's %q", part)
		}
	}

	// Charged once, logged once, where its client called.
	reader := a.issueWith(firm, false, "100/s", "clients:read")
	remaining := func(r response) int {
		m := regexp.MustCompile(`r=(\d+)`).FindStringSubmatch(r.Header.Get("RateLimit"))
		if m == nil {
			t.Fatalf("no RateLimit header: %v", r.Header)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	first := a.do(t, "GET", "/v1/clients?limit=2", reader.Token, nil)
	second := a.do(t, "GET", "/v1/clients?limit=3", reader.Token, nil)
	if first.StatusCode != 200 || second.StatusCode != 200 || remaining(first)-remaining(second) != 1 {
		t.Errorf("two forwarded reads: %d then %d left", remaining(first), remaining(second))
	}
	eventually.True(t, 5*time.Second, poll, "the reads in a's access log", func() bool {
		return strings.Contains(a.logs.String(), `/v1/clients?limit=3`)
	})
	for _, uri := range []string{`/v1/clients?limit=2`, `/v1/clients?limit=3`} {
		if n := accessLines(a.logs.String(), uri); n != 1 {
			t.Errorf("%s is in a's access log %d times, want once", uri, n)
		}
		if n := accessLines(b.logs.String(), uri); n != 0 {
			t.Errorf("%s is in the holder's access log %d times, want none", uri, n)
		}
	}
}

// accessLines counts the access log lines of uri in logs.
func accessLines(logs, uri string) int {
	return len(slices.DeleteFunc(strings.Split(logs, "\n"), func(l string) bool {
		return !strings.Contains(l, `"http.log.access`) || !strings.Contains(l, `"uri":"`+uri+`"`)
	}))
}
