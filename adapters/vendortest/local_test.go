package vendortest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ServeLocal serves every double on its port from the first one up, with
// data, through fronts whose URLs are the ones the doubles write.
func TestServeLocal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	l, err := ServeLocal(LocalOptions{Host: "127.0.0.1", First: first, Gateway: "http://localhost:8080"})
	if err != nil {
		t.Skipf("ports from %d are not all free: %v", first, err)
	}
	defer l.Close()
	if len(l.Served) != 6 {
		t.Fatalf("serves %d doubles, want 6", len(l.Served))
	}
	for i, s := range l.Served {
		if s.URL != "http://127.0.0.1:"+strconv.Itoa(first+i) {
			t.Errorf("%s at %s", s.Name, s.URL)
		}
	}
	req, _ := http.NewRequest("GET", l.Served[0].URL+"/v3/Contacts", nil)
	req.Header.Set("Authorization", "Bearer bearer-token")
	req.Header.Set("AccessKey", "access-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Value []map[string]any `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || len(page.Value) == 0 {
		t.Fatalf("Karbon's contacts: %d %v %v", resp.StatusCode, err, page)
	}
	resp.Body.Close()
	// Xero's consent page, for the gateway's callback.
	consent := l.Served[1].URL + "/identity/connect/authorize?response_type=code&client_id=xero-client&redirect_uri=" +
		"http%3A%2F%2F127.0.0.1%3A8080%2Fconnect%2Fcallback&scope=openid+accounting.transactions.read&state=s1&code_challenge=" +
		strings.Repeat("a", 43) + "&code_challenge_method=S256"
	resp, err = http.Get(consent)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `id="allow"`) {
		t.Fatalf("Xero's consent page: %d %s", resp.StatusCode, body)
	}
}

// What the doubles issued outlives a restart when a state file keeps it:
// a consent's access and refresh tokens still work, and Karbon's
// subscriptions still deliver; Karbon tells them of a change made through
// its API, signed with the subscription's key.
func TestServeLocalKeepsWhatItIssued(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := LocalOptions{Host: "127.0.0.1", First: first, Gateway: "http://localhost:8080", State: filepath.Join(t.TempDir(), "state.json")}
	l, err := ServeLocal(opts)
	if err != nil {
		t.Skipf("ports from %d are not all free: %v", first, err)
	}
	access, refresh := l.Xero.Identity.Consent("offline_access accounting.invoices.read")
	got := make(chan *http.Request, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.Header.Set("X-Body", string(body))
		got <- r
	}))
	defer hook.Close()
	karbon := func(l *Local, method, path, body string) int {
		req, _ := http.NewRequest(method, l.Served[0].URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer bearer-token")
		req.Header.Set("AccessKey", "access-key")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := karbon(l, "POST", "/v3/WebhookSubscriptions", `{"TargetUrl":"`+hook.URL+`","WebhookType":"Contact","SigningKey":"sk-1"}`); st != 201 {
		t.Fatalf("subscribing: %d", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = ServeLocal(opts)
	if err != nil {
		t.Fatalf("serving again: %v", err)
	}
	defer l.Close()
	invoices, _ := http.NewRequest("GET", l.Xero.URL+"/Invoices", nil)
	invoices.Header.Set("Authorization", "Bearer "+access)
	invoices.Header.Set("xero-tenant-id", l.Xero.TenantID)
	if resp, err := http.DefaultClient.Do(invoices); err != nil || resp.StatusCode != 200 {
		t.Errorf("the access token issued before the restart: %v %v", resp.Status, err)
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}
	tok, _ := http.NewRequest("POST", l.Xero.Identity.TokenURL(), strings.NewReader(form.Encode()))
	tok.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	tok.SetBasicAuth(l.Xero.Identity.ClientID, l.Xero.Identity.ClientSecret)
	if resp, err := http.DefaultClient.Do(tok); err != nil || resp.StatusCode != 200 {
		t.Errorf("the refresh token issued before the restart: %v %v", resp.Status, err)
	}
	if subs := l.Karbon.Subscriptions(); len(subs) != 1 || subs[0].TargetUrl != hook.URL {
		t.Fatalf("Karbon's subscriptions after the restart: %+v", subs)
	}
	if st := karbon(l, "PATCH", "/v3/Contacts/C001", `{"FirstName":"Benedict"}`); st != 204 {
		t.Fatalf("changing a contact: %d", st)
	}
	select {
	case r := <-got:
		body := r.Header.Get("X-Body")
		if !strings.Contains(body, `"ResourcePermaKey":"C001"`) || !strings.Contains(body, `"ActionType":"Updated"`) ||
			r.Header.Get("Signature") != SignKarbon("sk-1", []byte(body)) {
			t.Errorf("Karbon's notification: %s signed %s", body, r.Header.Get("Signature"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Karbon told no subscriber of the change")
	}
}
