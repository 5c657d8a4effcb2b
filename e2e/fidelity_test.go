package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
)

// TestVendorAnswersTheGatewayCannotUse is issue 16's fidelity item through
// the whole API, with reads served from the read model: a vendor answer
// the sync cannot use (a next link that repeats, a refusal) shows in
// readiness as the sync failing (why it fails only at the admin endpoint,
// never on the public probe), while /v1 keeps answering from the copy; a read that does reach the vendor (a record the backfill has
// not copied yet) answers a refusal with the contract's 503 and an answer
// it cannot use with its 502, at once, never a 500 or a hang.
func TestVendorAnswersTheGatewayCannotUse(t *testing.T) {
	v := startVendors(t, vendorOptions{setup: func(k *vendortest.Karbon, _ *vendortest.Xero) { k.LoopNextLinks(true) }})
	g := v.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	k, x := v.k, v.x
	tok := g.issue("frm_hollis", false, allReadWrite...).Token

	t.Run("a backfill on a repeating next link fails; why shows to the admin, not on the public probe", func(t *testing.T) {
		waitSyncs(t, g, 10*time.Second, "Karbon's sync to fail on paging and the others to be live", func(s map[string]string) bool {
			return strings.HasPrefix(s["karbon"], "failing") &&
				strings.HasPrefix(s["xero"], "live") && strings.HasPrefix(s["sharepoint"], "live")
		})
		ready := string(g.do(t, "GET", "/readyz", "", nil).body)
		for _, leak := range []string{"paging repeats", "/v3/", "$skip", "http"} {
			if strings.Contains(ready, leak) {
				t.Errorf("/readyz shows the vendor's words (%q): %s", leak, ready)
			}
		}
		status, err := g.cli("sync", "status", "--firm", "frm_hollis", "--json")
		if err != nil || !strings.Contains(status, "paging repeats") {
			t.Fatalf("the admin endpoint does not say why the sync fails: %v %s", err, status)
		}
	})

	t.Run("reads keep answering from the copy", func(t *testing.T) {
		r := g.do(t, "GET", "/v1/jobs?stage=in_review", tok, nil)
		if r.StatusCode != http.StatusOK || r.Header.Get("Data-State") != "failing" {
			t.Fatalf("%d (Data-State %q) %s", r.StatusCode, r.Header.Get("Data-State"), r.body)
		}
		r = g.do(t, "GET", "/v1/invoices?limit=5", tok, nil)
		if r.StatusCode != http.StatusOK || r.Header.Get("Data-State") != "live" || len(r.json(t)["data"].([]any)) != 5 {
			t.Fatalf("invoices while Karbon fails: %d (Data-State %q) %s", r.StatusCode, r.Header.Get("Data-State"), r.body)
		}
	})

	// Jobs are never backfilled while Karbon's contacts page in a loop:
	// reading one goes to Karbon.
	t.Run("a record not copied yet is read from the vendor", func(t *testing.T) {
		r := g.do(t, "GET", "/v1/jobs/job_W0002", tok, nil)
		if r.StatusCode != http.StatusOK || r.json(t)["id"] != "job_W0002" {
			t.Fatalf("%d %s", r.StatusCode, r.body)
		}
		if r := g.do(t, "GET", "/v1/jobs/job_W9999", tok, nil); r.StatusCode != http.StatusNotFound {
			t.Fatalf("a job Karbon does not have: %d %s", r.StatusCode, r.body)
		}
	})

	t.Run("Karbon refuses a read of one record with a 4xx: 503, not 500", func(t *testing.T) {
		k.FaultOn("/v3/WorkItems/W0001", vendortest.Fault{Status: http.StatusBadRequest,
			Body: `{"error":{"code":"4002","message":"The query specified in the URI is not valid."}}`})
		r := g.do(t, "GET", "/v1/jobs/job_W0001", tok, nil)
		if r.StatusCode != http.StatusServiceUnavailable || r.errorCode(t) != "upstream_unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%d %s (Retry-After %q)", r.StatusCode, r.body, r.Header.Get("Retry-After"))
		}
	})

	t.Run("an answer not in the vendor's shape is a 502", func(t *testing.T) {
		k.FaultOn("/v3/WorkItems/W0001", vendortest.Fault{Status: http.StatusOK, Body: `<html>maintenance</html>`})
		start := time.Now()
		r := g.do(t, "GET", "/v1/jobs/job_W0001", tok, nil)
		if r.StatusCode != http.StatusBadGateway || r.errorCode(t) != "upstream_unavailable" || time.Since(start) > 10*time.Second {
			t.Fatalf("%d %s after %s", r.StatusCode, r.body, time.Since(start))
		}
	})

	t.Run("once Karbon pages properly again the backfill ends", func(t *testing.T) {
		k.LoopNextLinks(false)
		waitSyncs(t, g, 15*time.Second, "Karbon's sync to be live", allLive)
		if n := len(pageAll(t, g, tok, "/v1/jobs?stage=in_review", 50)); n != 60 {
			t.Fatalf("%d jobs in review, want 60", n)
		}
	})

	t.Run("Xero refuses the sync's reads with a 4xx: failing and why, reads from the copy", func(t *testing.T) {
		x.Faults.Down(vendortest.Fault{Status: http.StatusBadRequest,
			Body: `{"ErrorNumber":10,"Type":"ValidationException","Message":"A validation exception occurred"}`})
		waitSyncs(t, g, 15*time.Second, "Xero's sync to fail", func(s map[string]string) bool {
			return strings.HasPrefix(s["xero"], "failing")
		})
		r := g.do(t, "GET", "/v1/invoices?limit=10", tok, nil)
		if r.StatusCode != http.StatusOK || r.Header.Get("Data-State") != "failing" || len(r.json(t)["data"].([]any)) != 10 {
			t.Fatalf("%d (Data-State %q) %s", r.StatusCode, r.Header.Get("Data-State"), r.body)
		}
		x.Faults.Up()
		waitSyncs(t, g, 15*time.Second, "Xero's sync to be live again", allLive)
	})
}
