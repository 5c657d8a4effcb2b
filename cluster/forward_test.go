package cluster

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
)

// A request one instance forwards is taken by another that shares the
// secrets key, with the caller's credential, path and body; anything
// changed on the way, signed under another key, or too old is refused.
func TestForwardedRequestsAreSignedByAnInstance(t *testing.T) {
	key, _ := sealed.Random()
	a := New(Config{ForwardKey: key.Derive("forwarded requests v1")}, nil, nil, nil)
	cred := &credential.Credential{ID: "cred_1", Firm: "frm_a", Scopes: []string{"clients:write"}}
	caller := httptest.NewRequest("PATCH", "/v1/clients/cli_1?expand=contacts", strings.NewReader(`{"name":"Ann"}`))
	caller.Header.Set("Authorization", "Bearer secret-token")
	caller.Header.Set("Idempotency-Key", "k1")
	forward := func() *http.Request {
		out, err := a.forwardRequest(caller, "http://10.0.0.2:8080", cred, []byte(`{"name":"Ann"}`))
		if err != nil {
			t.Fatal(err)
		}
		if out.Header.Get("Authorization") != "" {
			t.Fatal("the bearer token went to the other instance")
		}
		if out.URL.String() != "http://10.0.0.2:8080/_practicegw/forwarded/v1/clients/cli_1?expand=contacts" {
			t.Fatalf("forwarded to %s", out.URL)
		}
		// As the holder's server receives it.
		in := httptest.NewRequest(out.Method, out.URL.RequestURI(), out.Body)
		in.Header = out.Header.Clone()
		return in
	}
	in, got, err := a.Forwarded(forward())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(in.Body)
	if got.ID != "cred_1" || got.Firm != "frm_a" || in.URL.Path != "/v1/clients/cli_1" || in.URL.RawQuery != "expand=contacts" ||
		string(body) != `{"name":"Ann"}` || in.Header.Get("Idempotency-Key") != "k1" {
		t.Fatalf("taken as %s %s %q with %+v", in.Method, in.URL, body, got)
	}

	tampered := map[string]func(r *http.Request){
		"another path": func(r *http.Request) { r.URL.Path = "/_practicegw/forwarded/v1/clients/cli_2" },
		"another body": func(r *http.Request) { r.Body = io.NopCloser(bytes.NewReader([]byte(`{"name":"Bob"}`))) },
		"another firm": func(r *http.Request) {
			at, c, sig, _ := splitForwarded(r.Header.Get(headerForwarded))
			r.Header.Set(headerForwarded, at+"."+strings.Replace(c, "a", "b", 1)+"."+sig)
		},
		"no signature": func(r *http.Request) { r.Header.Del(headerForwarded) },
		"too old": func(r *http.Request) {
			_, c, _, _ := splitForwarded(r.Header.Get(headerForwarded))
			at := strconv.FormatInt(time.Now().Add(-2*forwardSkew).UnixMilli(), 10)
			r.Header.Set(headerForwarded, at+"."+c+"."+a.signForward("PATCH", "/v1/clients/cli_1?expand=contacts", at, c, []byte(`{"name":"Ann"}`)))
		},
	}
	for name, change := range tampered {
		r := forward()
		change(r)
		if _, _, err := a.Forwarded(r); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	other, _ := sealed.Random()
	if _, _, err := New(Config{ForwardKey: other.Derive("forwarded requests v1")}, nil, nil, nil).Forwarded(forward()); err == nil {
		t.Error("taken under another secrets key")
	}
	if _, _, err := New(Config{}, nil, nil, nil).Forwarded(forward()); err == nil {
		t.Error("taken by an instance without a bound")
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
