package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
)

// nonces is the store of nonces every instance shares, in memory; down
// makes it fail.
type nonces struct {
	mu   sync.Mutex
	seen map[string]bool
	down bool
}

func (n *nonces) ClaimNonce(_ context.Context, nonce string, _ time.Duration) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return false, errors.New("redis: connection refused")
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	if n.seen[nonce] {
		return false, nil
	}
	n.seen[nonce] = true
	return true, nil
}

// registry is the credentials as the holder's registry knows them: some
// revoked, some with fewer scopes than the signing instance said.
type registry struct {
	mu      sync.Mutex
	revoked map[string]bool
	now     map[string]*credential.Credential
}

func (g *registry) Standing(c *credential.Credential) (*credential.Credential, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.revoked[c.ID] {
		return nil, fmt.Errorf("credential revoked: %s", c.ID)
	}
	if cur, ok := g.now[c.ID]; ok {
		return cur, nil
	}
	return c, nil
}

// A request one instance forwards is taken once by another that shares
// the secrets key and the nonces, with the caller's credential, path,
// body and the headers the holder acts on, and nothing else; anything
// changed or added on the way, signed under another key, outside the
// window of a few seconds, or taken before (by this instance or another)
// is refused, each for its reason.
func TestForwardedRequestsAreTakenOnceAsSigned(t *testing.T) {
	key, _ := sealed.Random()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	shared := &nonces{}
	reg := &registry{revoked: map[string]bool{}, now: map[string]*credential.Credential{}}
	cfg := Config{ForwardKey: key.Derive("forwarded requests v1"), Nonces: shared, Credentials: reg, Clock: clock}
	logs, seen := observer.New(zapcore.DebugLevel)
	a, other := New(cfg, nil, nil, nil), New(cfg, nil, nil, nil)
	holder := New(cfg, nil, nil, zap.New(logs))
	cred := &credential.Credential{ID: "cred_1", Firm: "frm_a", Scopes: []string{"clients:write"}}
	caller := httptest.NewRequest("PATCH", "/v1/clients/cli_1?expand=contacts", strings.NewReader(`{"name":"Ann"}`))
	caller.Header.Set("Authorization", "Bearer secret-token")
	caller.Header.Set("Idempotency-Key", "k1")
	caller.Header.Set("Content-Type", "application/json")
	caller.Header.Set("Cookie", "practicegw_console=s")
	caller.Header.Set("X-Forwarded-For", "203.0.113.9")
	forward := func() *http.Request {
		out, err := a.forwardRequest(caller, "http://10.0.0.2:8080", cred, []byte(`{"name":"Ann"}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"Authorization", "Cookie", "X-Forwarded-For"} {
			if out.Header.Get(name) != "" {
				t.Fatalf("%s went to the other instance", name)
			}
		}
		if out.URL.String() != "http://10.0.0.2:8080/_practicegw/forwarded/v1/clients/cli_1?expand=contacts" {
			t.Fatalf("forwarded to %s", out.URL)
		}
		// As the holder's server receives it.
		in := httptest.NewRequest(out.Method, out.URL.RequestURI(), out.Body)
		in.Header = out.Header.Clone()
		return in
	}
	captured := forward()
	replay := func() *http.Request {
		in := httptest.NewRequest(captured.Method, captured.URL.RequestURI(), strings.NewReader(`{"name":"Ann"}`))
		in.Header = captured.Header.Clone()
		return in
	}
	in, got, err := holder.Forwarded(replay())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(in.Body)
	if got.ID != "cred_1" || got.Firm != "frm_a" || in.URL.Path != "/v1/clients/cli_1" || in.URL.RawQuery != "expand=contacts" ||
		string(body) != `{"name":"Ann"}` || in.Header.Get("Idempotency-Key") != "k1" || in.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("taken as %s %s %q with %+v", in.Method, in.URL, body, got)
	}
	if in.Header.Get(headerForwarded) != "" || len(in.Header) != 2 {
		t.Fatalf("the holder acts on headers that were not signed: %v", in.Header)
	}
	for name, h := range map[string]*Cluster{"the holder": holder, "another instance": other} {
		if _, _, err := h.Forwarded(replay()); !errors.Is(err, ErrReplayed) {
			t.Errorf("replayed to %s: %v, want ErrReplayed", name, err)
		}
	}

	// Each change on the way is refused for its reason, even on a request
	// never taken.
	resign := func(r *http.Request, at time.Time) {
		s, _, _ := parseForwarded(r.Header.Get(headerForwarded))
		s.at = strconv.FormatInt(at.UnixMilli(), 10)
		s.method, s.uri, s.header, s.body = r.Method, strings.TrimPrefix(r.URL.RequestURI(), forwardPrefix), r.Header, []byte(`{"name":"Ann"}`)
		r.Header.Set(headerForwarded, strings.Join([]string{forwardVersion, s.at, s.nonce, s.cred, s.sign(cfg.ForwardKey)}, "."))
	}
	tampered := map[string]struct {
		change func(r *http.Request)
		want   error
	}{
		"another path":            {func(r *http.Request) { r.URL.Path = "/_practicegw/forwarded/v1/clients/cli_2" }, ErrForged},
		"another query":           {func(r *http.Request) { r.URL.RawQuery = "expand=none" }, ErrForged},
		"another method":          {func(r *http.Request) { r.Method = "DELETE" }, ErrForged},
		"another body":            {func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(`{"name":"Bob"}`)) }, ErrForged},
		"another Idempotency-Key": {func(r *http.Request) { r.Header.Set("Idempotency-Key", "k2") }, ErrForged},
		"an If-Match added":       {func(r *http.Request) { r.Header.Set("If-Match", `"v3"`) }, ErrForged},
		"another Content-Type":    {func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, ErrForged},
		"no Idempotency-Key":      {func(r *http.Request) { r.Header.Del("Idempotency-Key") }, ErrForged},
		"another firm": {func(r *http.Request) {
			v := strings.Split(r.Header.Get(headerForwarded), ".")
			v[3] = strings.Replace(v[3], "a", "b", 1)
			r.Header.Set(headerForwarded, strings.Join(v, "."))
		}, ErrForged},
		"another nonce": {func(r *http.Request) {
			v := strings.Split(r.Header.Get(headerForwarded), ".")
			v[2] = "AAAAAAAAAAAAAAAAAAAAAA"
			r.Header.Set(headerForwarded, strings.Join(v, "."))
		}, ErrForged},
		"another time": {func(r *http.Request) {
			v := strings.Split(r.Header.Get(headerForwarded), ".")
			v[1] = strconv.FormatInt(now.Add(-time.Second).UnixMilli(), 10)
			r.Header.Set(headerForwarded, strings.Join(v, "."))
		}, ErrForged},
		"no signature":         {func(r *http.Request) { r.Header.Del(headerForwarded) }, ErrNotForwarded},
		"the form before this": {func(r *http.Request) { r.Header.Set(headerForwarded, "1800000000000.e30.c2ln") }, ErrNotForwarded},
		"outside the prefix":   {func(r *http.Request) { r.URL.Path = "/v1/clients/cli_1" }, ErrForged},
		"signed too long ago":  {func(r *http.Request) { resign(r, now.Add(-forwardSkew-time.Millisecond)) }, ErrStale},
		"signed in the future": {func(r *http.Request) { resign(r, now.Add(forwardSkew+time.Millisecond)) }, ErrStale},
	}
	for name, tc := range tampered {
		r := forward()
		tc.change(r)
		if _, _, err := holder.Forwarded(r); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// Within the window either way, as signed, it is taken.
	for _, d := range []time.Duration{-forwardSkew + time.Millisecond, forwardSkew - time.Millisecond} {
		r := forward()
		resign(r, now.Add(d))
		if _, _, err := holder.Forwarded(r); err != nil {
			t.Errorf("signed %s from the holder's clock: %v", d, err)
		}
	}

	// The credential as the holder's registry knows it, not as signed:
	// revoked is refused, fewer scopes are the route's to judge.
	reg.now["cred_1"] = &credential.Credential{ID: "cred_1", Firm: "frm_a", Scopes: []string{"clients:read"}}
	if _, got, err := holder.Forwarded(forward()); err != nil || got.Allows("clients:write") {
		t.Errorf("with the scope gone from the registry: %+v, %v", got, err)
	}
	reg.revoked["cred_1"] = true
	if _, _, err := holder.Forwarded(forward()); !errors.Is(err, ErrCredential) {
		t.Errorf("revoked since it was signed: %v, want ErrCredential", err)
	}
	reg.now["cred_1"] = &credential.Credential{ID: "cred_1", Firm: "frm_b"}
	delete(reg.revoked, "cred_1")
	if _, _, err := holder.Forwarded(forward()); !errors.Is(err, ErrCredential) {
		t.Errorf("of another firm in the registry: %v, want ErrCredential", err)
	}

	otherKey, _ := sealed.Random()
	elsewhere := New(Config{ForwardKey: otherKey.Derive("forwarded requests v1"), Nonces: &nonces{}, Credentials: reg, Clock: clock}, nil, nil, nil)
	if _, _, err := elsewhere.Forwarded(forward()); !errors.Is(err, ErrForged) {
		t.Errorf("under another secrets key: %v, want ErrForged", err)
	}
	if _, _, err := New(Config{}, nil, nil, nil).Forwarded(forward()); !errors.Is(err, ErrNotClustered) {
		t.Errorf("by an instance without a bound: %v", err)
	}
	shared.down = true
	if _, _, err := holder.Forwarded(forward()); !errors.Is(err, ErrNoNonces) {
		t.Errorf("with the nonces' store down: %v, want ErrNoNonces", err)
	}
	for err, want := range map[error]string{ErrReplayed: "replayed", ErrForged: "forged", fmt.Errorf("%w: 6s", ErrStale): "stale", io.EOF: "other"} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %s, want %s", err, got, want)
		}
	}

	// Every refusal was logged, for its reason, and no line holds a word
	// of the header: not its signature, nonce or credential.
	refusals := seen.FilterMessage("forwarded request refused").All()
	if len(refusals) < len(tampered) {
		t.Errorf("%d refusals logged, want at least %d", len(refusals), len(tampered))
	}
	parts := strings.Split(captured.Header.Get(headerForwarded), ".")
	for _, e := range seen.All() {
		line, _ := json.Marshal(e.ContextMap())
		for _, part := range parts[2:] {
			if strings.Contains(e.Message+string(line), part) {
				t.Errorf("a log line holds the header: %s %s", e.Message, line)
			}
		}
	}
}

// A request for a firm held elsewhere is answered with the holder's bytes
// and headers and the caller's Request-Id; a holder that cannot be dialled
// is forgotten and the request answered here; a write whose holder drops
// it while answering is ErrHolderGone, never answered here again.
func TestForwardSendsToAHolder(t *testing.T) {
	key, _ := sealed.Random()
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// Taken, then gone before answering.
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Data-State", "live")
		w.Header().Set("Request-Id", "req_holder")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"data":[]}`)
	}))
	defer holder.Close()
	store := &members{now: time.Now(), m: map[string]readmodel.Member{}}
	ctx := t.Context()
	_ = store.Heartbeat(ctx, readmodel.Member{ID: "gw1", Advertise: holder.URL, Holds: []string{"frm_a"}}, time.Minute)
	_ = store.Heartbeat(ctx, readmodel.Member{ID: "gw2", Advertise: "http://127.0.0.1:1", Holds: []string{"frm_b"}}, time.Minute)
	f := &firms{all: []string{"frm_a", "frm_b"}, held: map[string]bool{}}
	c := New(Config{ID: "gw0", Advertise: "http://gw0", Memory: 1, Replicas: 1, ForwardKey: key.Derive("forwarded requests v1")}, store, f, nil)
	c.Place(ctx)
	f.held = map[string]bool{} // the bound holds nothing here

	cred := &credential.Credential{ID: "cred_1", Firm: "frm_a", Scopes: []string{"clients:read"}}
	rec := httptest.NewRecorder()
	rec.Header().Set("Request-Id", "req_caller")
	done, err := c.Forward(rec, httptest.NewRequest("GET", "/v1/clients", nil), cred, practice.Clients)
	if !done || err != nil || rec.Code != http.StatusOK || rec.Body.String() != `{"data":[]}` ||
		rec.Header().Get("Data-State") != "live" || rec.Header().Get("Request-Id") != "req_caller" {
		t.Fatalf("a read through the holder: %v %v %d %q %v", done, err, rec.Code, rec.Body, rec.Header())
	}
	if done, err := c.Forward(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/clients", strings.NewReader(`{}`)), cred, practice.Clients); done || !errors.Is(err, ErrHolderGone) {
		t.Fatalf("a write whose holder went away: %v %v, want ErrHolderGone", done, err)
	}
	b := &credential.Credential{ID: "cred_2", Firm: "frm_b"}
	if done, err := c.Forward(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/clients", strings.NewReader(`{}`)), b, practice.Clients); done || err != nil {
		t.Fatalf("a write to a holder never reached: %v %v, want answered here", done, err)
	}
	if got := c.Holders("frm_b"); len(got) != 0 {
		t.Errorf("the unreachable holder is still in the view: %v", got)
	}
	if done, _ := c.Forward(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/clients", nil), &credential.Credential{Firm: "frm_a", Sandbox: true}, practice.Clients); done {
		t.Error("a sandbox request was forwarded")
	}
}
