package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/store/credential"
)

// A request one instance forwards is taken by another that shares the
// secrets key, with the caller's credential, path and body; anything
// changed on the way, signed under another key, or too old is refused.
func TestForwardedRequestsAreSignedByAnInstance(t *testing.T) {
	key, _ := sealed.Random()
	a := &App{forwardKey: key.Derive("forwarded requests v1")}
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
	if _, _, err := (&App{forwardKey: other.Derive("forwarded requests v1")}).Forwarded(forward()); err == nil {
		t.Error("taken under another secrets key")
	}
	if _, _, err := (&App{}).Forwarded(forward()); err == nil {
		t.Error("taken by an instance without a bound")
	}
}
