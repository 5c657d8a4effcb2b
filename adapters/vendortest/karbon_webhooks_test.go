package vendortest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/webhooksig"
)

// karbonCall sends one request with a firm's access key and answers its
// status and body.
func karbonCall(t *testing.T, k *Karbon, accessKey, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, k.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+k.Bearer)
	req.Header.Set("AccessKey", accessKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// receiver is a webhook target that checks Karbon's signature the way the
// adapter does and answers with status.
type receiver struct {
	mu       sync.Mutex
	key      string
	status   int
	verified []string
	forged   int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if webhooksig.ValidHMAC([]byte(rc.key), body, r.Header.Get("Signature")) {
		rc.verified = append(rc.verified, string(body))
	} else {
		rc.forged++
	}
	w.WriteHeader(rc.status)
}

func (rc *receiver) set(status int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.status = status
}

// Webhook subscriptions are made, read and removed as Karbon publishes
// them, one per type and firm's access key; an unknown access key is
// refused; deliveries are signed with the subscription's SigningKey as
// the adapter checks; ten failed deliveries, or CancelSubscription, end
// one; DELETE of the collection removes Contact, Work and Note only.
func TestKarbonWebhookSubscriptions(t *testing.T) {
	requireDescription(t, karbonDescription)
	k := StartKarbon(t)
	const key = "0123456789abcdef-signing_KEY"
	rc := &receiver{key: key, status: http.StatusOK}
	target := httptest.NewServer(rc)
	defer target.Close()

	if st, _ := karbonCall(t, k, "another-firm", "GET", "/v3/WebhookSubscriptions/Work", ""); st != http.StatusUnauthorized {
		t.Fatalf("an unknown access key: %d, want 401", st)
	}
	for _, typ := range []string{"Work", "Contact", "User"} {
		body := `{"TargetUrl":"` + target.URL + `/hook","WebhookType":"` + typ + `","SigningKey":"` + key + `"}`
		st, got := karbonCall(t, k, k.AccessKey, "POST", "/v3/WebhookSubscriptions", body)
		if st != http.StatusCreated || got["WebhookType"] != typ || got["TargetUrl"] != target.URL+"/hook" {
			t.Fatalf("subscribe %s: %d %v", typ, st, got)
		}
	}
	st, _ := karbonCall(t, k, k.AccessKey, "POST", "/v3/WebhookSubscriptions", `{"TargetUrl":"https://elsewhere.example/h","WebhookType":"Work"}`)
	if st != http.StatusBadRequest {
		t.Fatalf("a second Work subscription: %d, want 400", st)
	}
	if st, got := karbonCall(t, k, k.AccessKey, "GET", "/v3/WebhookSubscriptions/Work", ""); st != http.StatusOK || got["TargetUrl"] != target.URL+"/hook" {
		t.Fatalf("GET Work: %d %v", st, got)
	}

	k.AddAccessKey("second-firm-key")
	if st, _ := karbonCall(t, k, "second-firm-key", "GET", "/v3/WebhookSubscriptions/Work", ""); st != http.StatusNotFound {
		t.Fatalf("the second firm sees the first's subscription: %d", st)
	}
	if st, _ := karbonCall(t, k, "second-firm-key", "POST", "/v3/WebhookSubscriptions",
		`{"TargetUrl":"`+target.URL+`/other","WebhookType":"Work","SigningKey":"`+key+`"}`); st != http.StatusCreated {
		t.Fatalf("the second firm's subscription: %d", st)
	}
	if n := len(k.Subscriptions()); n != 4 {
		t.Fatalf("%d subscriptions, want 4", n)
	}

	payload := KarbonWebhook("Work", "W0001", "Updated", time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	if got, err := k.Deliver("Work", payload, k.AccessKey); err != nil || len(got) != 1 || got[0] != http.StatusOK {
		t.Fatalf("deliver: %v %v", got, err)
	}
	if len(rc.verified) != 1 || rc.verified[0] != string(payload) || rc.forged != 0 {
		t.Fatalf("the receiver verified %d and refused %d deliveries", len(rc.verified), rc.forged)
	}

	rc.set(http.StatusServiceUnavailable)
	for i := range 10 {
		if got, err := k.Deliver("Work", payload, k.AccessKey); err != nil || got[0] != http.StatusServiceUnavailable {
			t.Fatalf("failed delivery %d: %v %v", i, got, err)
		}
	}
	if st, _ := karbonCall(t, k, k.AccessKey, "GET", "/v3/WebhookSubscriptions/Work", ""); st != http.StatusNotFound {
		t.Fatalf("after ten failed deliveries the subscription lives on: %d", st)
	}
	if _, err := k.Deliver("Work", payload, k.AccessKey); err == nil {
		t.Fatal("delivered to an ended subscription")
	}
	if st, _ := karbonCall(t, k, "second-firm-key", "GET", "/v3/WebhookSubscriptions/Work", ""); st != http.StatusOK {
		t.Fatalf("the other firm's subscription ended too: %d", st)
	}

	k.CancelSubscription("Work")
	if st, _ := karbonCall(t, k, "second-firm-key", "GET", "/v3/WebhookSubscriptions/Work", ""); st != http.StatusNotFound {
		t.Fatalf("after CancelSubscription: %d", st)
	}
	if st, _ := karbonCall(t, k, k.AccessKey, "DELETE", "/v3/WebhookSubscriptions/Contact", ""); st != http.StatusNoContent {
		t.Fatalf("DELETE Contact: %d", st)
	}
	if st, _ := karbonCall(t, k, k.AccessKey, "DELETE", "/v3/WebhookSubscriptions/Contact", ""); st != http.StatusNotFound {
		t.Fatalf("DELETE Contact again: %d", st)
	}
	body := `{"TargetUrl":"` + target.URL + `/hook","WebhookType":"Note"}`
	if st, _ := karbonCall(t, k, k.AccessKey, "POST", "/v3/WebhookSubscriptions", body); st != http.StatusCreated {
		t.Fatalf("subscribe Note without a signing key: %d", st)
	}
	if st, _ := karbonCall(t, k, k.AccessKey, "DELETE", "/v3/WebhookSubscriptions", ""); st != http.StatusNoContent {
		t.Fatalf("DELETE all: %d", st)
	}
	left := k.Subscriptions()
	if len(left) != 1 || left[0].WebhookType != "User" || left[0].AccessKey != k.AccessKey || left[0].SigningKey != key {
		t.Fatalf("after DELETE all: %+v; want the User subscription alone", left)
	}
}

// The subscription calls are checked against Karbon's description like
// every other request: a body it does not allow is a violation.
func TestKarbonWebhookSubscriptionsAreChecked(t *testing.T) {
	requireDescription(t, karbonDescription)
	k := NewKarbon()
	defer k.Close()
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v3/WebhookSubscriptions", `{"TargetUrl":"https://gw.example.com/h","WebhookType":"Work","SigningKey":"0123456789abcdef"}`, ""},
		{"POST", "/v3/WebhookSubscriptions", `{"TargetUrl":"https://gw.example.com/h","WebhookType":"User","SigningKey":"short"}`, "SigningKey"},
		{"POST", "/v3/WebhookSubscriptions", `{"TargetUrl":"https://gw.example.com/h","WebhookType":"Jobs"}`, "WebhookType"},
		{"GET", "/v3/WebhookSubscriptions/Work", "", ""},
		{"GET", "/v3/WebhookSubscriptions/Jobs", "", "WebhookType"},
		{"DELETE", "/v3/WebhookSubscriptions/Work", "", ""},
		{"DELETE", "/v3/WebhookSubscriptions", "", ""},
	} {
		before := len(k.Violations())
		karbonCall(t, k, k.AccessKey, c.method, c.path, c.body)
		got := k.Violations()[before:]
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s %s %s: violations %v", c.method, c.path, c.body, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s %s %s: violations %v, want one about %s", c.method, c.path, c.body, got, c.want)
		}
	}
	target := httptest.NewServer(&receiver{status: http.StatusOK})
	defer target.Close()
	karbonCall(t, k, k.AccessKey, "POST", "/v3/WebhookSubscriptions", `{"TargetUrl":"`+target.URL+`","WebhookType":"Work"}`)
	before := len(k.Violations())
	if _, err := k.Deliver("Work", KarbonWebhook("Contact", "C1", "Updated", time.Now())); err != nil {
		t.Fatal(err)
	}
	if got := k.Violations()[before:]; len(got) != 1 || !strings.Contains(got[0], "webhook Work") {
		t.Errorf("a Contact payload delivered as Work: violations %v", got)
	}
}
