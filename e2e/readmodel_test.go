package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// The read model of a firm on real systems, through the binary: the
// backfill, its resumption after a crash, changes noticed by polling, by
// webhooks and by reconciliation, and the model shared by two instances.

// TestReadModelBackfill: every record the doubles hold is served by /v1
// from the copy, live and confirmed, and readiness showed the backfill's
// progress or its end, never a failure.
func TestReadModelBackfill(t *testing.T) {
	v := startVendors(t, vendorOptions{})
	g := v.gateway(t)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token

	waitSyncs(t, g, 15*time.Second, "every sync to be live", func(s map[string]string) bool {
		for system, detail := range s {
			if !strings.HasPrefix(detail, "backfilling") && !strings.HasPrefix(detail, "live") {
				t.Fatalf("sync %s during the backfill: %q", system, detail)
			}
		}
		return allLive(s)
	})
	for path, want := range map[string]int{
		"/v1/jobs": 240, "/v1/jobs?stage=in_review": 60, "/v1/jobs?client=cli_c-C005": 2,
		"/v1/clients": 130, "/v1/invoices": 30, "/v1/documents": 12, "/v1/people": 1,
	} {
		if n := len(pageAll(t, g, tok, path, 200)); n != want {
			t.Errorf("%s: %d records, want the %d the doubles hold", path, n, want)
		}
	}
	for _, path := range []string{"/v1/jobs?limit=1", "/v1/jobs/job_W0007", "/v1/invoices?limit=1", "/v1/documents?limit=1"} {
		r := g.do(t, "GET", path, tok, nil)
		confirmed, err := time.Parse(time.RFC3339, r.Header.Get("Data-Confirmed-At"))
		if r.StatusCode != 200 || r.Header.Get("Data-State") != "live" || err != nil || confirmed.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: %d, Data-State %q, Data-Confirmed-At %q", path, r.StatusCode, r.Header.Get("Data-State"), r.Header.Get("Data-Confirmed-At"))
		}
	}
	if j := g.do(t, "GET", "/v1/jobs/job_W0004", tok, nil).json(t); j["stage"] != "in_review" || j["title"] != "Accounts 4" {
		t.Errorf("job_W0004 from the copy: %v", j)
	}
}

// TestReadModelBackfillResumesAfterSIGKILL: a gateway killed in the middle
// of a backfill resumes it from its checkpoint on the same data directory:
// Karbon's pages read before the kill are not read again, but for the
// sync's page in flight.
func TestReadModelBackfillResumesAfterSIGKILL(t *testing.T) {
	const workItems = 3000
	v := startVendors(t, vendorOptions{contacts: 5, workItems: workItems, setup: func(k *vendortest.Karbon, _ *vendortest.Xero) {
		// Every Karbon answer takes a while, so the backfill takes
		// seconds.
		k.Faults.Down(vendortest.Fault{Delay: 40 * time.Millisecond})
	}})
	g := v.gateway(t)
	progress := regexp.MustCompile(`Karbon jobs: ([0-9,]+)`)
	waitSyncs(t, g, 30*time.Second, "the backfill of Karbon's jobs to be under way", func(s map[string]string) bool {
		m := progress.FindStringSubmatch(s["karbon"])
		if m == nil || !strings.HasPrefix(s["karbon"], "backfilling") {
			return false
		}
		n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		return n > 0
	})
	g.kill()
	before := workItemPages(v.k.Requests())
	if len(before) == 0 || before[len(before)-1] >= workItems-100 {
		t.Fatalf("killed too late to tell: Karbon's work item pages read %v", before)
	}
	readBefore := len(v.k.Requests())

	// On the embedded store nothing else can run the sync: the restarted
	// gateway resumes at once, not once the killed one's lease expires.
	g.start(v.config)
	waitSyncs(t, g, 10*time.Second, "the resumed backfill to end", allLive)
	after := workItemPages(v.k.Requests()[readBefore:])
	last := before[len(before)-1]
	// The sync's page in flight is 200 records: up to three of Karbon's
	// pages of 100, the last read before the kill among them.
	for _, skip := range after {
		if skip < last-200 {
			t.Fatalf("after the restart Karbon's page at $skip=%d was read again; before the kill the backfill had read %v, after %v", skip, before, after)
		}
	}
	tok := g.issue("frm_hollis", false, "jobs:read").Token
	if n := len(pageAll(t, g, tok, "/v1/jobs", 200)); n != workItems {
		t.Fatalf("%d jobs after the resumed backfill, want %d", n, workItems)
	}
}

// workItemPages are the $skip of each list of Karbon's work items (the
// backfill's pages, with no $filter) in a request log.
func workItemPages(requests []string) []int {
	var skips []int
	for _, r := range requests {
		rest, ok := strings.CutPrefix(r, "GET /v3/WorkItems?")
		if !ok {
			continue
		}
		q, _ := url.ParseQuery(rest)
		if q.Get("$filter") != "" {
			continue
		}
		skip, _ := strconv.Atoi(q.Get("$skip"))
		skips = append(skips, skip)
	}
	return skips
}

// TestReadModelPollingFindsAChange: changes made inside the vendors with
// no webhook sent are found by the sync: a Karbon contact renamed (Karbon
// stamps contacts with their modification time) by the next poll, a work
// item moved (Karbon keeps no modification time on work items, so they
// are not polled) by the next reconciliation. Each raises one event, and
// /v1 shows the change.
func TestReadModelPollingFindsAChange(t *testing.T) {
	v := startVendors(t, vendorOptions{})
	g := v.gateway(t, "PRACTICEGW_SYNC_POLL=1s", "PRACTICEGW_SYNC_RECONCILE=3s")
	waitSyncs(t, g, 15*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "job.stage_changed", "client.updated")
	rc.setSecrets(secret)

	v.k.AddContact(vendortest.KarbonContact{ContactKey: "C005", FirstName: "Ann", LastName: "Renamed", ContactType: "Client",
		Email: "ann5@example.com", Country: "GB", OwnerKey: "U1", ExternalKey: "xc-5", LastModified: time.Now().UTC()})
	v.k.MoveWorkItem("W0003", "Completed", "")
	got := rc.wait(2, 20*time.Second)
	events := map[string]int{}
	for _, d := range got {
		data := d.envelope["data"].(map[string]any)
		switch d.envelope["event"] {
		case "client.updated":
			if !strings.Contains(fmt.Sprint(data), "cli_c-C005") {
				t.Fatalf("client.updated for another client: %v", d.envelope)
			}
		case "job.stage_changed":
			if data["job_id"] != "job_W0003" || data["stage"] != "completed" {
				t.Fatalf("job.stage_changed: %v", d.envelope)
			}
		}
		events[d.envelope["event"].(string)]++
	}
	if c := g.do(t, "GET", "/v1/clients/cli_c-C005", tok, nil).json(t); c["name"] != "Ann Renamed" {
		t.Fatalf("cli_c-C005 after the poll: %v", c)
	}
	if j := g.do(t, "GET", "/v1/jobs/job_W0003", tok, nil).json(t); j["stage"] != "completed" {
		t.Fatalf("job_W0003 after the reconciliation: %v", j)
	}
	// Later polls and reconciliations read both again and raise nothing.
	waitConfirmed(t, g, tok, "/v1/clients", 2*time.Second)
	waitConfirmed(t, g, tok, "/v1/jobs", 3*time.Second)
	if got := rc.wait(0, 0); len(got) != 2 || events["client.updated"] != 1 || events["job.stage_changed"] != 1 {
		t.Fatalf("%d deliveries (%v), want one client.updated and one job.stage_changed", len(got), events)
	}
}

// TestReadModelWebhookAndPollingRaiseOneEvent: a move Karbon posts a
// webhook for, sent twice and then read again by a reconciliation, is one
// event.
func TestReadModelWebhookAndPollingRaiseOneEvent(t *testing.T) {
	v := startVendors(t, vendorOptions{})
	g := v.gateway(t, "PRACTICEGW_SYNC_POLL=1s", "PRACTICEGW_SYNC_RECONCILE=2s")
	waitSyncs(t, g, 15*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "job.stage_changed")
	rc.setSecrets(secret)

	before := g.do(t, "GET", "/v1/jobs/job_W0005", tok, nil).json(t)
	v.k.MoveWorkItem("W0005", "Completed", "Filed")
	moved := time.Now()
	body := vendortest.KarbonWebhook("Work", "W0005", "Updated", time.Now())
	for range 2 {
		if code := postSigned(t, g, "/ingest/frm_hollis/karbon", body, "Signature", vendortest.SignKarbon(karbonSigningKey, body)); code != 200 {
			t.Fatalf("Karbon webhook answered %d", code)
		}
	}
	got := rc.wait(1, 10*time.Second)
	if d := got[0].envelope["data"].(map[string]any); d["job_id"] != "job_W0005" {
		t.Fatalf("event: %v", got[0].envelope)
	}
	// Karbon dates no change of a work item: the gateway's stamp moves
	// the version and updated_at, in the event and in /v1, and
	// updated_since finds the job.
	object := got[0].envelope["data"].(map[string]any)["object"].(map[string]any)
	if v, was := object["version"].(float64), before["version"].(float64); v <= was {
		t.Fatalf("the event's version %v is not above %v before the move", v, was)
	}
	after := g.do(t, "GET", "/v1/jobs/job_W0005", tok, nil).json(t)
	if updated, _ := time.Parse(time.RFC3339Nano, after["updated_at"].(string)); after["version"] != object["version"] || updated.Before(moved) {
		t.Fatalf("after the move /v1 has %v, the event %v", after, object)
	}
	since := g.do(t, "GET", "/v1/jobs?updated_since="+moved.UTC().Format(time.RFC3339Nano), tok, nil).json(t)
	if items, _ := since["data"].([]any); len(items) != 1 {
		t.Fatalf("updated_since the move: %v, want the job moved", since)
	}
	waitConfirmed(t, g, tok, "/v1/jobs", 2*time.Second)
	if n := len(rc.wait(0, 0)); n != 1 {
		t.Fatalf("%d job.stage_changed deliveries, want 1", n)
	}
}

// waitPolls waits until the jobs have been confirmed n polls (of a second
// each) after now.
func waitPolls(t *testing.T, g *gateway, tok string, n int) {
	t.Helper()
	waitConfirmed(t, g, tok, "/v1/jobs", time.Duration(n)*time.Second)
}

// waitConfirmed waits until a collection's Data-Confirmed-At, to the
// second, is at least after past now: the sync has read it again since.
func waitConfirmed(t *testing.T, g *gateway, tok, path string, after time.Duration) {
	t.Helper()
	from := time.Now().Truncate(time.Second).Add(after)
	eventually.True(t, 20*time.Second, poll, path+" confirmed again", func() bool {
		confirmed, err := time.Parse(time.RFC3339, g.do(t, "GET", path+"?limit=1", tok, nil).Header.Get("Data-Confirmed-At"))
		return err == nil && !confirmed.Before(from)
	})
}

// TestReadModelReconciliationFindsADeletion: a work item deleted in Karbon
// is gone from /v1 once a reconciliation (asked for with practicegw sync
// resync) has run; the removal raises one job.deleted, delivered to the
// endpoint subscribed to it and to none subscribed to "*", and a polling
// mirror finds its tombstone with include_deleted. Another reconciliation
// raises nothing more.
func TestReadModelReconciliationFindsADeletion(t *testing.T) {
	v := startVendors(t, vendorOptions{contacts: 10, workItems: 20})
	g := v.gateway(t)
	waitSyncs(t, g, 15*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token
	if r := g.do(t, "GET", "/v1/jobs/job_W0007", tok, nil); r.StatusCode != 200 {
		t.Fatalf("job_W0007 before its deletion: %d %s", r.StatusCode, r.body)
	}
	removals, everything := newReceiver(t), newReceiver(t)
	_, secret := register(t, g, tok, removals.url(), "job.deleted")
	removals.setSecrets(secret)
	legacy, secret := register(t, g, tok, everything.url(), "*")
	everything.setSecrets(secret)
	resync := func() {
		t.Helper()
		if out, err := g.cli("sync", "resync", "--firm", "frm_hollis", "--system", "records"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}

	removedFrom := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	v.k.RemoveWorkItem("W0007")
	resync()
	eventually.True(t, 15*time.Second, poll, "job_W0007 to be 404 after a reconciliation", func() bool {
		return g.do(t, "GET", "/v1/jobs/job_W0007", tok, nil).StatusCode == http.StatusNotFound
	})
	if n := len(pageAll(t, g, tok, "/v1/jobs", 200)); n != 19 {
		t.Fatalf("%d jobs after the deletion, want 19", n)
	}
	got := removals.wait(1, 15*time.Second)[0]
	data, _ := got.envelope["data"].(map[string]any)
	object, _ := data["object"].(map[string]any)
	if got.envelope["event"] != "job.deleted" || data["job_id"] != "job_W0007" || object["id"] != "job_W0007" || object["deleted"] != true {
		t.Fatalf("delivered for the removal: %s", got.body)
	}
	// The "*" endpoint had the same chance: its deliveries are queued
	// with the other's, when the event is recorded.
	if r := g.do(t, "GET", "/v1/webhook_endpoints/"+legacy+"/deliveries", tok, nil); r.StatusCode != 200 || len(r.json(t)["data"].([]any)) != 0 {
		t.Fatalf("the endpoint subscribed to * was sent the removal: %d %s", r.StatusCode, r.body)
	}

	// A polling mirror finds the tombstone the event carried.
	var tomb map[string]any
	for _, item := range pageAll(t, g, tok, "/v1/jobs?include_deleted=true&updated_since="+url.QueryEscape(removedFrom), 200) {
		if item["id"] == "job_W0007" {
			tomb = item
		}
	}
	if tomb == nil || tomb["deleted"] != true || tomb["version"] != object["version"] || tomb["deleted_at"] != object["deleted_at"] {
		t.Fatalf("tombstone listed %v, the event's %v", tomb, object)
	}

	// Another reconciliation finds it gone again, and raises nothing.
	lists := len(workItemPages(v.k.Requests()))
	resync()
	eventually.True(t, 15*time.Second, poll, "another reconciliation", func() bool {
		return len(workItemPages(v.k.Requests())) > lists && allLive(syncStates(t, g))
	})
	seen := map[string]bool{}
	var aboutIt []string
	for _, e := range pageAll(t, g, tok, "/v1/events", 200) {
		id, _ := e["id"].(string)
		if seen[id] {
			t.Fatalf("event %s listed twice", id)
		}
		seen[id] = true
		if strings.Contains(fmt.Sprint(e["data"]), "W0007") {
			aboutIt = append(aboutIt, fmt.Sprint(e["event"]))
		}
	}
	if len(aboutIt) != 1 || aboutIt[0] != "job.deleted" {
		t.Fatalf("events about job_W0007: %v, want one job.deleted", aboutIt)
	}
	if r := g.do(t, "GET", "/v1/jobs/job_W0007", tok, nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("job_W0007 after another reconciliation: %d %s", r.StatusCode, r.body)
	}
}

// TestReadModelOutageServesTheCopy: with Karbon down after the backfill,
// /v1 keeps answering from the copy, says it is failing, and keeps the
// time the data was last confirmed.
func TestReadModelOutageServesTheCopy(t *testing.T) {
	v := startVendors(t, vendorOptions{})
	g := v.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	waitSyncs(t, g, 15*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token

	v.k.Faults.Down(vendortest.Fault{Status: http.StatusServiceUnavailable, RetryAfter: "1",
		Body: `{"error":{"code":"5003","message":"Service unavailable"}}`})
	down := time.Now()
	var confirmed string
	eventually.True(t, 20*time.Second, poll, "Data-State to say Karbon's data is failing", func() bool {
		r := g.do(t, "GET", "/v1/jobs?limit=1", tok, nil)
		if r.StatusCode != 200 {
			t.Fatalf("/v1/jobs during the outage: %d %s", r.StatusCode, r.body)
		}
		confirmed = r.Header.Get("Data-Confirmed-At")
		state := r.Header.Get("Data-State")
		return state == "failing" || state == "lagging"
	})
	at, err := time.Parse(time.RFC3339, confirmed)
	if err != nil || at.After(down) {
		t.Fatalf("Data-Confirmed-At %q during an outage that began at %s", confirmed, down.Format(time.RFC3339Nano))
	}
	if s := syncStates(t, g)["karbon"]; !strings.HasPrefix(s, "failing") {
		t.Fatalf("readiness during the outage: %q", s)
	}
	// More failed polls change nothing of what is served.
	hits := v.k.Faults.Hits()
	eventually.True(t, 20*time.Second, poll, "more polls of Karbon", func() bool { return v.k.Faults.Hits() >= hits+2 })
	r := g.do(t, "GET", "/v1/jobs/job_W0009", tok, nil)
	if r.StatusCode != 200 || r.json(t)["id"] != "job_W0009" || r.Header.Get("Data-Confirmed-At") != confirmed || r.Header.Get("Data-State") != "failing" {
		t.Fatalf("job_W0009 during the outage: %d (Data-State %q, Data-Confirmed-At %q, was %q) %s", r.StatusCode,
			r.Header.Get("Data-State"), r.Header.Get("Data-Confirmed-At"), confirmed, r.body)
	}
	if n := len(pageAll(t, g, tok, "/v1/jobs", 200)); n != 240 {
		t.Fatalf("%d jobs during the outage, want 240", n)
	}
}

// twoVendorGateways runs two gateways on one redis-server serving the
// firm from the same doubles.
func twoVendorGateways(t *testing.T, env ...string) (*vendors, *gateway, *gateway) {
	t.Helper()
	redis := redistest.Start(t)
	v := startVendors(t, vendorOptions{})
	env = append([]string{"PRACTICEGW_REDIS=" + redis.URL(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}, env...)
	return v, v.gateway(t, env...), v.gateway(t, env...)
}

// TestReadModelReadsYourWritesAcrossInstances: a client changed through
// one instance reads back changed from the other at once, and its event
// is raised once.
func TestReadModelReadsYourWritesAcrossInstances(t *testing.T) {
	_, a, b := twoVendorGateways(t)
	waitSyncs(t, a, 15*time.Second, "every sync to be live", allLive)
	tok := a.issue("frm_hollis", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, a, tok, rc.url(), "client.updated")
	rc.setSecrets(secret)

	r := a.do(t, "PATCH", "/v1/clients/cli_c-C007", tok, map[string]any{"name": "Ann Renamed"})
	if r.StatusCode != 200 || r.json(t)["name"] != "Ann Renamed" {
		t.Fatalf("PATCH on A: %d %s", r.StatusCode, r.body)
	}
	if got := b.do(t, "GET", "/v1/clients/cli_c-C007", tok, nil); got.StatusCode != 200 || got.json(t)["name"] != "Ann Renamed" {
		t.Fatalf("GET on B right after the PATCH on A: %d %s", got.StatusCode, got.body)
	}
	found := false
	for _, c := range pageAll(t, b, tok, "/v1/clients", 200) {
		found = found || c["id"] == "cli_c-C007" && c["name"] == "Ann Renamed"
	}
	if !found {
		t.Fatal("B's list does not have the new name")
	}
	rc.wait(1, 10*time.Second)
	// Both instances list the one event.
	for _, g := range []*gateway{a, b} {
		n := 0
		for _, e := range pageAll(t, g, tok, "/v1/events", 200) {
			if e["event"] == "client.updated" && strings.Contains(fmt.Sprint(e["data"]), "cli_c-C007") {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s lists %d client.updated events for cli_c-C007, want 1", g.addr, n)
		}
	}
	if n := len(rc.wait(1, 0)); n != 1 {
		t.Fatalf("%d client.updated deliveries, want 1", n)
	}
}

// TestReadModelOneSyncAcrossInstances: two instances on one Redis run
// each firm system's sync once between them: the backfill reads Karbon's
// pages once, and both report the same state.
func TestReadModelOneSyncAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	v := startVendors(t, vendorOptions{})
	// Each work item page takes a second, so the second instance starts
	// while the first is still backfilling and the two compete for it.
	v.k.FaultOn("/v3/WorkItems", vendortest.Fault{Delay: time.Second}, vendortest.Fault{Delay: time.Second}, vendortest.Fault{Delay: time.Second})
	env := []string{"PRACTICEGW_REDIS=" + redis.URL(), "PRACTICEGW_SECRETS_KEY=" + secretsKey()}
	a := v.gateway(t, env...)
	b := v.gateway(t, env...)
	waitSyncs(t, b, 5*time.Second, "B to see the backfill under way", func(s map[string]string) bool {
		return strings.HasPrefix(s["karbon"], "backfilling")
	})
	waitSyncs(t, a, 15*time.Second, "every sync to be live on A", allLive)
	waitSyncs(t, b, 15*time.Second, "every sync to be live on B", allLive)

	// Work items are polled by listing them whole (Karbon keeps no
	// modification time on them), first a poll interval (a minute) after
	// their backfill: every read of their pages until then is the one
	// backfill's.
	first := 0
	for _, r := range v.k.Requests() {
		if strings.HasPrefix(r, "GET /v3/WorkItems?") && !strings.Contains(r, "skip") && !strings.Contains(r, "filter") {
			first++
		}
	}
	if first != 1 {
		t.Errorf("the work items' first page was read %d times across two instances, want once: %v", first, v.k.Requests())
	}
	if pages := workItemPages(v.k.Requests()); len(pages) > 4 {
		t.Errorf("the work items' backfill read %d pages, want 4 at most (240 items, 100 a page): %v", len(pages), pages)
	}

	tok := a.issue("frm_hollis", false, "jobs:read").Token
	ra, rb := a.do(t, "GET", "/v1/jobs?limit=1", tok, nil), b.do(t, "GET", "/v1/jobs?limit=1", tok, nil)
	if ra.Header.Get("Data-State") != "live" || rb.Header.Get("Data-State") != "live" ||
		ra.Header.Get("Data-Confirmed-At") != rb.Header.Get("Data-Confirmed-At") {
		t.Fatalf("A: %q %q; B: %q %q", ra.Header.Get("Data-State"), ra.Header.Get("Data-Confirmed-At"),
			rb.Header.Get("Data-State"), rb.Header.Get("Data-Confirmed-At"))
	}
	if n := len(pageAll(t, b, tok, "/v1/jobs", 200)); n != 240 {
		t.Fatalf("B serves %d jobs, want 240", n)
	}
}
