package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// receiver is a webhook endpoint that verifies Standard Webhooks
// signatures on its own, from the specification: the signed content is
// "id.timestamp.body", the key is the base64 part of the whsec_ secret,
// and webhook-signature holds space-separated "v1,<base64 HMAC-SHA256>".
// It checks every delivery against the OpenAPI document's event catalog.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret []string
	got    []delivered
	status func(n int) int
}

type delivered struct {
	id, timestamp string
	signatures    []string
	envelope      map[string]any
	body          []byte
	at            time.Time
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t, status: func(int) int { return 200 }}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/webhooks" }

func (rc *receiver) setSecrets(s ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = s
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivered{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"),
		signatures: strings.Fields(r.Header.Get("webhook-signature")), body: body, at: time.Now()}
	if err := json.Unmarshal(body, &d.envelope); err != nil {
		rc.t.Errorf("webhook body is not JSON: %s", body)
	}
	// Every delivery is what the OpenAPI document's event catalog says.
	if err := checkDelivery(r.Header, body); err != nil {
		rc.t.Errorf("delivery %s does not match the event catalog: %v\n%s", d.id, err, body)
	}
	rc.mu.Lock()
	secrets := rc.secret
	n := len(rc.got)
	rc.got = append(rc.got, d)
	rc.mu.Unlock()
	for _, secret := range secrets {
		if !verifies(secret, d.id, d.timestamp, body, d.signatures) {
			rc.t.Errorf("delivery %s does not verify with %s…", d.id, secret[:10])
		}
	}
	w.WriteHeader(rc.status(n))
}

func verifies(secret, id, ts string, body []byte, sigs []string) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

// wait returns the deliveries once there are at least n.
func (rc *receiver) wait(n int, within time.Duration) []delivered {
	rc.t.Helper()
	var got []delivered
	eventually.NoError(rc.t, within, poll, fmt.Sprintf("%d deliveries", n), func() error {
		rc.mu.Lock()
		got = append([]delivered(nil), rc.got...)
		rc.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("%d deliveries", len(got))
		}
		return nil
	})
	return got
}

func register(t *testing.T, g *gateway, token, url string, events ...string) (id, secret string) {
	t.Helper()
	r := g.do(t, "POST", "/v1/webhook_endpoints", token, map[string]any{"url": url, "events": events, "description": "test"})
	if r.StatusCode != 201 {
		t.Fatalf("register: %d %s", r.StatusCode, r.body)
	}
	ep := r.json(t)
	if ep["status"] != "enabled" || !strings.HasPrefix(ep["secret"].(string), "whsec_") || !strings.HasPrefix(ep["id"].(string), "we_") {
		t.Fatalf("registered endpoint: %s", r.body)
	}
	return ep["id"].(string), ep["secret"].(string)
}

func TestJobMoveArrivesSignedWithinASecond(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	rc := newReceiver(t)
	epID, secret := register(t, g, tok, rc.url(), "job.stage_changed", "job.closed")
	rc.setSecrets(secret)
	if r := g.do(t, "GET", "/v1/webhook_endpoints/"+epID, tok, nil); strings.Contains(string(r.body), "whsec_") {
		t.Fatalf("the secret is shown again: %s", r.body)
	}

	job := g.do(t, "GET", "/v1/jobs?stage=in_progress&limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)
	start := time.Now()
	g.do(t, "POST", "/v1/jobs/"+job["id"].(string)+"/stage", tok, map[string]any{"stage": "in_review", "note": "Partner review"})
	got := rc.wait(1, 5*time.Second)
	if took := got[0].at.Sub(start); took > time.Second {
		t.Errorf("delivered %s after the change, want under a second", took)
	}
	env := got[0].envelope
	if env["event"] != "job.stage_changed" || env["firm"] != "frm_acme" || env["sandbox"] != false || env["id"] != got[0].id {
		t.Fatalf("envelope: %v", env)
	}
	data := env["data"].(map[string]any)
	if data["job_id"] != job["id"] || data["previous_stage"] != "in_progress" || data["stage"] != "in_review" ||
		data["note"] != "Partner review" || data["object"].(map[string]any)["stage"] != "in_review" {
		t.Fatalf("data: %v", data)
	}
	// The event is recorded and listed.
	ev := g.do(t, "GET", "/v1/events/"+got[0].id, tok, nil)
	if ev.StatusCode != 200 || ev.json(t)["event"] != "job.stage_changed" {
		t.Fatalf("event: %d %s", ev.StatusCode, ev.body)
	}
	list := g.do(t, "GET", "/v1/events?event=job.stage_changed", tok, nil).json(t)["data"].([]any)
	if len(list) == 0 || list[len(list)-1].(map[string]any)["id"] != got[0].id {
		t.Fatalf("events list: %v", list)
	}
	// Completing the job raises job.stage_changed and job.closed.
	g.do(t, "POST", "/v1/jobs/"+job["id"].(string)+"/stage", tok, map[string]any{"stage": "completed"})
	kinds := map[string]bool{}
	for _, d := range rc.wait(3, 5*time.Second)[1:] {
		kinds[d.envelope["event"].(string)] = true
	}
	if !kinds["job.stage_changed"] || !kinds["job.closed"] {
		t.Fatalf("completing a job raised %v", kinds)
	}
}

func TestEveryEventKindThroughTheSandbox(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	sandbox := g.issue("frm_acme", true, allReadWrite...).Token
	live := g.issue("frm_acme", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, sandbox, rc.url(), "*", "engagement_letter.signed")
	rc.setSecrets(secret)
	letters := newReceiver(t)
	_, lsecret := register(t, g, sandbox, letters.url(), "engagement_letter.signed")
	letters.setSecrets(lsecret)
	liveRc := newReceiver(t)
	liveID, _ := register(t, g, live, liveRc.url(), "*")

	kinds := []string{"client.created", "client.updated", "engagement.created", "engagement.signed", "job.opened",
		"job.stage_changed", "job.closed", "document.filed", "invoice.raised", "invoice.paid"}
	want := map[string]string{}
	for _, k := range kinds {
		out, err := g.cli("trigger", k, "--firm", "frm_acme")
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(out)
		if !strings.HasPrefix(id, "evt_") {
			t.Fatalf("trigger %s printed %q", k, out)
		}
		want[id] = k
	}
	eventually.True(t, 10*time.Second, 20*time.Millisecond, "every triggered event", func() bool {
		seen := 0
		rc.mu.Lock()
		for _, d := range rc.got {
			if want[d.id] == d.envelope["event"] {
				seen++
			}
			if d.envelope["sandbox"] != true {
				t.Errorf("sandbox endpoint got a live event %v", d.envelope)
			}
		}
		rc.mu.Unlock()
		return seen >= len(want)
	})
	byID := map[string]delivered{}
	for _, d := range rc.wait(len(want), time.Second) {
		byID[d.id] = d
	}
	for id, kind := range want {
		d, ok := byID[id]
		if !ok || d.envelope["event"] != kind {
			t.Errorf("%s (%s) not delivered", id, kind)
			continue
		}
		data := d.envelope["data"].(map[string]any)
		if _, ok := data["object"].(map[string]any); !ok {
			t.Errorf("%s: data has no object: %v", kind, data)
		}
		switch kind {
		case "engagement.signed":
			if data["engagement_id"] == nil || data["client_id"] == nil || data["released_jobs"] == nil {
				t.Errorf("engagement.signed data: %v", data)
			}
		case "invoice.paid":
			if data["invoice_id"] == nil || data["settled_via"] == "" || data["settled_via"] == nil {
				t.Errorf("invoice.paid data: %v", data)
			}
		}
	}
	// Between them the two endpoints received every event name the catalog
	// describes, each checked against its schema there.
	cat, err := servedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range append(rc.wait(0, 0), letters.wait(1, 5*time.Second)...) {
		names[d.envelope["event"].(string)] = true
	}
	for _, name := range cat.names() {
		// The sandbox's records are never removed: the removal kinds are
		// delivered and checked against the catalog by
		// TestReadModelReconciliationFindsADeletion.
		if strings.HasSuffix(name, ".deleted") {
			continue
		}
		if !names[name] {
			t.Errorf("no %s was delivered to check the catalog against", name)
		}
	}
	// The letter-only endpoint gets the signing under its alias, same id.
	var signed string
	for id, k := range want {
		if k == "engagement.signed" {
			signed = id
		}
	}
	got := letters.wait(1, 5*time.Second)
	if got[0].id != signed || got[0].envelope["event"] != "engagement_letter.signed" {
		t.Fatalf("alias delivery: %s %v (want %s)", got[0].id, got[0].envelope["event"], signed)
	}
	// Nothing reached the live endpoint, and nothing will: each event's
	// deliveries are queued together when it is recorded, and the live
	// endpoint has none.
	if page := g.do(t, "GET", "/v1/webhook_endpoints/"+liveID+"/deliveries", live, nil).json(t)["data"].([]any); len(page) != 0 {
		t.Fatalf("a live endpoint has %d deliveries of sandbox events", len(page))
	}
	liveRc.mu.Lock()
	defer liveRc.mu.Unlock()
	if len(liveRc.got) != 0 {
		t.Fatalf("a live endpoint received %d sandbox events", len(liveRc.got))
	}
}

func TestRetriesFailureReplayAndExport(t *testing.T) {
	g := startGateway(t, gatewayOptions{env: []string{
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE=50ms", "PRACTICEGW_WEBHOOK_BACKOFF_FACTOR=1.5", "PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN=20ms"}})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	failing := true
	var mu sync.Mutex
	rc := newReceiver(t)
	rc.status = func(int) int {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return 500
		}
		return 204
	}
	epID, secret := register(t, g, tok, rc.url(), "client.created")
	rc.setSecrets(secret)
	g.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Failing Receiver Ltd"})
	got := rc.wait(6, 20*time.Second)
	for _, d := range got {
		if d.id != got[0].id {
			t.Fatalf("attempts carry different event ids: %s, %s", d.id, got[0].id)
		}
	}
	var dlv map[string]any
	eventually.True(t, 10*time.Second, 50*time.Millisecond, "one failed delivery", func() bool {
		page := g.do(t, "GET", "/v1/webhook_endpoints/"+epID+"/deliveries?state=failed", tok, nil).json(t)["data"].([]any)
		if len(page) == 1 {
			dlv = page[0].(map[string]any)
		}
		return dlv != nil
	})
	if dlv == nil {
		t.Fatal("the delivery never reached failed")
	}
	attempts := dlv["attempts"].([]any)
	if len(attempts) != 6 {
		t.Fatalf("%d attempts logged, want 6", len(attempts))
	}
	for i, a := range attempts {
		a := a.(map[string]any)
		if int(a["number"].(float64)) != i+1 || a["response_code"].(float64) != 500 || a["trigger"] != "scheduled" {
			t.Errorf("attempt %d: %v", i+1, a)
		}
	}
	// A failed delivery has no next attempt: the six requests are all
	// there will be.
	if next, ok := dlv["next_attempt_at"]; ok {
		t.Fatalf("a failed delivery has its next attempt at %v", next)
	}
	if n := len(rc.wait(6, 0)); n != 6 {
		t.Fatalf("%d attempts after failing, want no more than 6", n)
	}

	mu.Lock()
	failing = false
	mu.Unlock()
	// The six failures may have left the endpoint's breaker open: the
	// replay is then held back with Retry-After until it cools down.
	var r response
	eventually.True(t, 10*time.Second, poll, "the replay to be made", func() bool {
		r = g.do(t, "POST", "/v1/deliveries/"+dlv["id"].(string)+"/replay", tok, nil)
		if r.StatusCode == http.StatusConflict && r.Header.Get("Retry-After") != "" {
			return false
		}
		if r.StatusCode != 200 || r.json(t)["state"] != "delivered" {
			t.Fatalf("replay: %d %s", r.StatusCode, r.body)
		}
		return true
	})
	last := r.json(t)["attempts"].([]any)[6].(map[string]any)
	if last["trigger"] != "replay" || last["response_code"].(float64) != 204 {
		t.Fatalf("replay attempt: %v", last)
	}
	if got := rc.wait(7, 5*time.Second); got[6].id != got[0].id {
		t.Fatal("a replay carries a new event id")
	}

	// Export: NDJSON has the delivery with its 7 attempts; CSV a row each.
	nd := g.do(t, "GET", "/v1/webhook_endpoints/"+epID+"/deliveries", tok, nil, "Accept", "application/x-ndjson")
	if nd.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("ndjson content type %q", nd.Header.Get("Content-Type"))
	}
	lines := strings.Split(strings.TrimSpace(string(nd.body)), "\n")
	var exported map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &exported) != nil || len(exported["attempts"].([]any)) != 7 {
		t.Fatalf("ndjson export: %s", nd.body)
	}
	cs := g.do(t, "GET", "/v1/webhook_endpoints/"+epID+"/deliveries", tok, nil, "Accept", "text/csv")
	rows, err := csv.NewReader(strings.NewReader(string(cs.body))).ReadAll()
	if err != nil || len(rows) != 8 {
		t.Fatalf("csv export (%v): %s", err, cs.body)
	}
	if n, _ := strconv.Atoi(rows[7][5]); rows[0][5] != "attempt" || n != 7 {
		t.Fatalf("csv rows: %v / %v", rows[0], rows[7])
	}
}

func TestBulkReplayAndRotation(t *testing.T) {
	g := startGateway(t, gatewayOptions{env: []string{
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE=20ms", "PRACTICEGW_WEBHOOK_BACKOFF_FACTOR=1", "PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN=10ms"}})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	var mu sync.Mutex
	failing := true
	rc := newReceiver(t)
	rc.status = func(int) int {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return 503
		}
		return 200
	}
	epID, secret := register(t, g, tok, rc.url(), "client.created")
	rc.setSecrets(secret)
	since := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	for i := 0; i < 3; i++ {
		g.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Bulk " + strconv.Itoa(i)})
	}
	t0 := time.Now()
	waitDeliveryCount(t, g, tok, epID, "failed", 3, 20*time.Second)
	t.Logf("failed after %s (%d attempts)", time.Since(t0), len(rc.wait(0, 0)))
	mu.Lock()
	failing = false
	mu.Unlock()

	// Rotation: from now on both secrets sign.
	rot := g.do(t, "POST", "/v1/webhook_endpoints/"+epID+"/rotate_secret", tok, nil)
	newSecret, _ := rot.json(t)["secret"].(string)
	if rot.StatusCode != 200 || !strings.HasPrefix(newSecret, "whsec_") || newSecret == secret {
		t.Fatalf("rotate: %d %s", rot.StatusCode, rot.body)
	}
	rc.setSecrets(secret, newSecret)
	before := len(rc.wait(0, 0))
	r := g.do(t, "POST", "/v1/webhook_endpoints/"+epID+"/replay_failed", tok, map[string]any{"since": since})
	if r.StatusCode != 202 || r.json(t)["replaying"].(float64) != 3 {
		t.Fatalf("bulk replay: %d %s", r.StatusCode, r.body)
	}
	for _, d := range rc.wait(before+3, 10*time.Second)[before:] {
		if len(d.signatures) != 2 {
			t.Errorf("after rotation a delivery carries %d signatures, want 2", len(d.signatures))
		}
	}
	waitDeliveryCount(t, g, tok, epID, "delivered", 3, 10*time.Second)
}

// waitDeliveryCount waits until an endpoint has exactly n deliveries in a
// state.
func waitDeliveryCount(t *testing.T, g *gateway, token, endpoint, state string, n int, within time.Duration) {
	t.Helper()
	eventually.NoError(t, within, 50*time.Millisecond, fmt.Sprintf("%d %s deliveries on %s", n, state, endpoint), func() error {
		got := len(g.do(t, "GET", "/v1/webhook_endpoints/"+endpoint+"/deliveries?state="+state, token, nil).json(t)["data"].([]any))
		if got != n {
			return fmt.Errorf("%d %s deliveries", got, state)
		}
		return nil
	})
}

func TestWebhookURLsAreChecked(t *testing.T) {
	g := startGateway(t, gatewayOptions{env: []string{"PRACTICEGW_WEBHOOK_ALLOW_CIDRS="}})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	for _, url := range []string{"http://127.0.0.1:9/x", "http://169.254.169.254/latest/meta-data", "http://10.1.2.3/hook",
		"http://[::1]/hook", "http://localhost/hook", "ftp://example.com/x", "not a url"} {
		r := g.do(t, "POST", "/v1/webhook_endpoints", tok, map[string]any{"url": url, "events": []string{"job.opened"}})
		if r.StatusCode != 400 || r.errorCode(t) != "parameter_invalid" {
			t.Errorf("%s: %d %s", url, r.StatusCode, r.body)
		}
	}
	r := g.do(t, "POST", "/v1/webhook_endpoints", tok, map[string]any{"url": "https://example.com/hook", "events": []string{"job.exploded"}})
	if r.StatusCode != 400 {
		t.Errorf("unknown event kind: %d %s", r.StatusCode, r.body)
	}
}
