package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
)

// TestVendorAnswersTheGatewayCannotUse is issue 16's fidelity item through
// the whole API: a vendor's refusal of a read the gateway made is the
// contract's 503, never a 500; an answer the gateway cannot use (a next
// link that repeats, a body that is not the vendor's shape) is the
// contract's 502 at once, never a hang; and the first look at the records
// at start-up ends on a repeating next link, says so in readiness, and
// leaves the gateway serving.
func TestVendorAnswersTheGatewayCannotUse(t *testing.T) {
	g, k, x := vendorFirmWith(t, func(k *vendortest.Karbon, _ *vendortest.Xero) { k.LoopNextLinks(true) })
	tok := g.issue("frm_hollis", false, allReadWrite...).Token

	t.Run("the first look at start-up ends and says why", func(t *testing.T) {
		ready := string(g.do(t, "GET", "/readyz", "", nil).body)
		if !strings.Contains(ready, "first look at its records failed") || !strings.Contains(ready, "paging repeats") {
			t.Fatalf("readiness after a first look at a Karbon whose next link repeats: %s", ready)
		}
	})

	t.Run("a repeating next link is a 502", func(t *testing.T) {
		start := time.Now()
		r := g.do(t, "GET", "/v1/jobs?stage=in_review", tok, nil)
		if r.StatusCode != http.StatusBadGateway || r.errorCode(t) != "upstream_unavailable" || time.Since(start) > 10*time.Second {
			t.Fatalf("%d %s after %s", r.StatusCode, r.body, time.Since(start))
		}
	})
	k.LoopNextLinks(false)
	if r := g.do(t, "GET", "/v1/jobs?stage=in_review", tok, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("once Karbon pages properly again: %d %s", r.StatusCode, r.body)
	}

	refused := []struct {
		name   string
		faults *vendortest.Faults
		body   string
		path   string
	}{
		{"Karbon refuses a read of one record", &k.Faults,
			`{"error":{"code":"4002","message":"The query specified in the URI is not valid."}}`, "/v1/jobs/job_W0001"},
		{"Karbon refuses a list", &k.Faults,
			`{"error":{"code":"4002","message":"The query specified in the URI is not valid."}}`, "/v1/jobs?limit=10"},
		{"Xero refuses a list", &x.Faults,
			`{"ErrorNumber":10,"Type":"ValidationException","Message":"A validation exception occurred"}`, "/v1/invoices?limit=10"},
	}
	for _, c := range refused {
		t.Run(c.name+" with a 4xx: 503, not 500", func(t *testing.T) {
			c.faults.Queue(vendortest.Fault{Status: http.StatusBadRequest, Body: c.body})
			r := g.do(t, "GET", c.path, tok, nil)
			if r.StatusCode != http.StatusServiceUnavailable || r.errorCode(t) != "upstream_unavailable" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("%d %s (Retry-After %q)", r.StatusCode, r.body, r.Header.Get("Retry-After"))
			}
		})
	}

	t.Run("an answer not in the vendor's shape is a 502", func(t *testing.T) {
		k.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `<html>maintenance</html>`})
		r := g.do(t, "GET", "/v1/jobs/job_W0001", tok, nil)
		if r.StatusCode != http.StatusBadGateway || r.errorCode(t) != "upstream_unavailable" {
			t.Fatalf("%d %s", r.StatusCode, r.body)
		}
	})
}
