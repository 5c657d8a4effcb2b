package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// TestReadModelStoppedKarbonTurnsEveryKindAwayFromLive: with the Karbon
// double stopped (its address refuses connections), every kind Karbon
// serves (clients, jobs, people) answers Data-State failing or lagging
// within a poll, not only the kind whose poll came first, and keeps the
// Data-Confirmed-At it had; the kinds of the firm's other systems (Xero's
// invoices, SharePoint's documents) stay live.
func TestReadModelStoppedKarbonTurnsEveryKindAwayFromLive(t *testing.T) {
	v := startVendors(t, vendorOptions{})
	g := v.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	waitSyncs(t, g, 15*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token
	karbon := []string{"/v1/clients?limit=1", "/v1/jobs?limit=1", "/v1/people?limit=1"}
	others := []string{"/v1/invoices?limit=1", "/v1/documents?limit=1"}
	for _, path := range append(karbon, others...) {
		if r := g.do(t, "GET", path, tok, nil); r.StatusCode != 200 || r.Header.Get("Data-State") != "live" {
			t.Fatalf("%s before Karbon stopped: %d Data-State %q", path, r.StatusCode, r.Header.Get("Data-State"))
		}
	}

	v.k.Close()
	stopped := time.Now()
	confirmed := map[string]string{}
	eventually.True(t, 20*time.Second, poll, "every kind Karbon serves to say it is not live", func() bool {
		away := true
		for _, path := range karbon {
			r := g.do(t, "GET", path, tok, nil)
			if r.StatusCode != 200 {
				t.Fatalf("%s with Karbon stopped: %d %s", path, r.StatusCode, r.body)
			}
			state := r.Header.Get("Data-State")
			away = away && (state == "failing" || state == "lagging")
			confirmed[path] = r.Header.Get("Data-Confirmed-At")
		}
		return away
	})
	t.Logf("every Karbon kind away from live %s after the stop", time.Since(stopped).Round(time.Millisecond))
	for path, at := range confirmed {
		c, err := time.Parse(time.RFC3339, at)
		if err != nil || c.After(stopped) {
			t.Errorf("%s: Data-Confirmed-At %q after Karbon stopped at %s", path, at, stopped.Format(time.RFC3339Nano))
		}
	}
	// More polls fail (one a second) until the deadline; none turns a
	// kind live or moves its confirmation. The reads are spaced as a
	// client's would be, within the credential's rate limit.
	until := time.Now().Add(3 * time.Second)
	for tick := time.NewTicker(100 * time.Millisecond); time.Now().Before(until); <-tick.C {
		for _, path := range karbon {
			r := g.do(t, "GET", path, tok, nil)
			if s := r.Header.Get("Data-State"); r.StatusCode != 200 || s != "failing" && s != "lagging" || r.Header.Get("Data-Confirmed-At") != confirmed[path] {
				t.Fatalf("%s with Karbon stopped: %d, Data-State %q, Data-Confirmed-At %q (was %q) %s", path, r.StatusCode, s,
					r.Header.Get("Data-Confirmed-At"), confirmed[path], tail(string(r.body), 300))
			}
		}
		for _, path := range others {
			if r := g.do(t, "GET", path, tok, nil); r.StatusCode != 200 || r.Header.Get("Data-State") != "live" {
				t.Fatalf("%s with Karbon stopped: %d, Data-State %q; Xero and SharePoint still answer", path, r.StatusCode, r.Header.Get("Data-State"))
			}
		}
	}
	if s := syncStates(t, g)["karbon"]; !strings.HasPrefix(s, "failing") {
		t.Fatalf("readiness with Karbon stopped: %q", s)
	}
}
