package ingest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// door is the practicegw app's receivers, by address: a firm's system by
// firm and name, a connect app's address by its name, a connection's by
// its system and id.
type door map[string]http.Handler

func (d door) FirmWebhook(firm, system string) (http.Handler, bool) {
	h, ok := d["firm "+firm+"/"+system]
	return h, ok
}

func (d door) ConnectionWebhook(system, connection string) (http.Handler, bool) {
	h, ok := d["connection "+system+"/"+connection]
	return h, ok
}

// receiver answers 200 and notes what it was given, as a vendor's
// receiver reads the body and the signature.
func receiver(seen *[]string, name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		*seen = append(*seen, name+" "+r.Method+" "+string(body)+" "+r.Header.Get("X-Signature"))
		w.WriteHeader(http.StatusOK)
	})
}

// One front door serves every vendor webhook by its address: a firm's
// Caddyfile system, a connect app's one address and a connection's own,
// each handed to its receiver as it came; any other address is the
// contract's 404, never a receiver's.
func TestFrontDoorRoutesByAddress(t *testing.T) {
	var seen []string
	h := &Handler{host: door{
		"firm frm_hollis/karbon":   receiver(&seen, "hollis karbon"),
		"firm frm_hollis/xero":     receiver(&seen, "hollis xero"),
		"connection xero/":         receiver(&seen, "xero app"),
		"connection karbon/con_k1": receiver(&seen, "karbon con_k1"),
	}}
	for _, c := range []struct{ path, want string }{
		{"/ingest/frm_hollis/karbon", "hollis karbon POST {} sig"},
		{"/ingest/frm_hollis/xero", "hollis xero POST {} sig"},
		{"/connect/webhooks/xero", "xero app POST {} sig"},
		{"/connect/webhooks/karbon/con_k1", "karbon con_k1 POST {} sig"},
	} {
		seen = nil
		r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader("{}"))
		r.Header.Set("X-Signature", "sig")
		w := httptest.NewRecorder()
		if err := h.ServeHTTP(w, r, nil); err != nil || w.Code != http.StatusOK {
			t.Fatalf("%s: %d %v", c.path, w.Code, err)
		}
		if len(seen) != 1 || seen[0] != c.want {
			t.Errorf("%s reached %q, want %q", c.path, seen, c.want)
		}
	}
	seen = nil
	for _, path := range []string{
		"/ingest/frm_hollis/sharepoint", "/ingest/frm_other/karbon", "/ingest/frm_hollis", "/ingest/frm_hollis/karbon/x",
		"/ingest//karbon", "/connect/webhooks/karbon/con_gone", "/connect/webhooks/karbon/con_k1/x",
		"/connect/webhooks/karbon/", "/connect/webhooks/", "/connect/webhooks/dropbox", "/connect/callback", "/v1/clients",
	} {
		w := httptest.NewRecorder()
		if err := h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}")), nil); err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); w.Code != http.StatusNotFound || err != nil ||
			body.Error.Code != "resource_not_found" || body.Error.Message == "" || w.Header().Get("Request-Id") == "" {
			t.Errorf("%s: %d %s", path, w.Code, w.Body)
		}
	}
	if len(seen) > 0 {
		t.Errorf("an unknown address reached %q", seen)
	}
}

// The Caddyfile's two forms: the front door, and one firm's system by its
// role (the form configurations written before the front door use).
func TestCaddyfileForms(t *testing.T) {
	for _, c := range []struct {
		in         string
		firm, role string
		err        bool
	}{
		{in: "practicegw_ingest"},
		{in: "practicegw_ingest frm_hollis records", firm: "frm_hollis", role: "records"},
		{in: "practicegw_ingest frm_hollis ledger", firm: "frm_hollis", role: "ledger"},
		{in: "practicegw_ingest frm_hollis documents", err: true},
		{in: "practicegw_ingest frm_hollis", err: true},
		{in: "practicegw_ingest frm_hollis records extra", err: true},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.in))
		if (err != nil) != c.err || !c.err && (h.Firm != c.firm || h.Role != c.role) {
			t.Errorf("%q: %+v %v", c.in, h, err)
		}
		if err == nil {
			if verr := h.Validate(); verr != nil {
				t.Errorf("%q does not validate: %v", c.in, verr)
			}
		}
	}
	if err := (&Handler{Role: "records"}).Validate(); err == nil {
		t.Error("a role without a firm validates")
	}
}
