package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// pageAll follows next_cursor through a collection and returns every item.
func pageAll(t *testing.T, g *gateway, token, path string, limit int) []map[string]any {
	t.Helper()
	var items []map[string]any
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	next := path + sep + fmt.Sprintf("limit=%d", limit)
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("paging did not end")
		}
		r := g.do(t, "GET", next, token, nil)
		if r.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", next, r.StatusCode, r.body)
		}
		var page struct {
			Data       []map[string]any `json:"data"`
			HasMore    bool             `json:"has_more"`
			NextCursor *string          `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		items = append(items, page.Data...)
		if !page.HasMore {
			if page.NextCursor != nil {
				t.Fatalf("last page of %s has next_cursor %q", path, *page.NextCursor)
			}
			return items
		}
		if page.NextCursor == nil || !strings.HasPrefix(*page.NextCursor, "cur_") {
			t.Fatalf("page of %s has has_more but next_cursor %v", path, page.NextCursor)
		}
		next = path + sep + fmt.Sprintf("limit=%d&cursor=%s", limit, url.QueryEscape(*page.NextCursor))
	}
}

func TestCollectionsPageEveryRecordOnce(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	minimum := map[string]int{"clients": 250, "jobs": 1000, "engagements": 300, "documents": 2000, "invoices": 1500, "people": 25}
	for kind, min := range minimum {
		items := pageAll(t, g, tok, "/v1/"+kind, 200)
		if len(items) < min {
			t.Errorf("%s: %d records, want at least %d", kind, len(items), min)
		}
		seen := map[string]bool{}
		prev := ""
		for _, it := range items {
			id := it["id"].(string)
			if seen[id] {
				t.Fatalf("%s: %s repeated", kind, id)
			}
			if id <= prev {
				t.Fatalf("%s: %s after %s: not in id order", kind, id, prev)
			}
			seen[id], prev = true, id
		}
	}
	// A small page size walks the same records as a large one.
	if a, b := len(pageAll(t, g, tok, "/v1/people", 200)), len(pageAll(t, g, tok, "/v1/people", 1)); a != b {
		t.Errorf("people: %d records at limit 200, %d at limit 1", a, b)
	}
}

func TestFilters(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	jobs := pageAll(t, g, tok, "/v1/jobs", 200)
	clients := pageAll(t, g, tok, "/v1/clients", 200)
	sample := jobs[len(jobs)/2]
	client := clients[7]

	check := func(path string, all []map[string]any, keep func(map[string]any) bool) {
		t.Helper()
		got := pageAll(t, g, tok, path, 200)
		want := 0
		for _, it := range all {
			if keep(it) {
				want++
			}
		}
		if len(got) != want || want == 0 {
			t.Errorf("%s: %d records, want %d (and more than none)", path, len(got), want)
		}
		for _, it := range got {
			if !keep(it) {
				t.Errorf("%s: %v does not match", path, it["id"])
			}
		}
	}
	check("/v1/jobs?stage=in_review", jobs, func(j map[string]any) bool { return j["stage"] == "in_review" })
	check("/v1/jobs?owner="+sample["owner"].(string), jobs, func(j map[string]any) bool { return j["owner"] == sample["owner"] })
	check("/v1/jobs?client="+sample["client"].(string), jobs, func(j map[string]any) bool { return j["client"] == sample["client"] })
	check("/v1/jobs?deadline_after=2026-01-01&deadline_before=2026-06-30", jobs, func(j map[string]any) bool {
		d := j["deadline"].(string)
		return d >= "2026-01-01" && d <= "2026-06-30"
	})
	check("/v1/jobs?stage=completed&owner="+sample["owner"].(string), jobs, func(j map[string]any) bool {
		return j["stage"] == "completed" && j["owner"] == sample["owner"]
	})
	check("/v1/clients?owner="+client["owner"].(string), clients, func(c map[string]any) bool { return c["owner"] == client["owner"] })
	check("/v1/clients?status=active", clients, func(c map[string]any) bool { return c["status"] == "active" })
	check("/v1/clients?last_activity_after=2025-09-01T00:00:00Z&last_activity_before=2026-01-01T00:00:00Z", clients, func(c map[string]any) bool {
		at, _ := time.Parse(time.RFC3339, c["last_activity_at"].(string))
		return !at.Before(time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)) && at.Before(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	})
	check("/v1/clients?updated_since=2025-12-01T00:00:00Z", clients, func(c map[string]any) bool {
		at, _ := time.Parse(time.RFC3339, c["updated_at"].(string))
		return !at.Before(time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC))
	})
}

func TestSingleReadsAndDocuments(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	for _, kind := range []string{"clients", "engagements", "jobs", "documents", "invoices", "people"} {
		first := g.do(t, "GET", "/v1/"+kind+"?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)
		r := g.do(t, "GET", "/v1/"+kind+"/"+first["id"].(string), tok, nil)
		if r.StatusCode != 200 {
			t.Fatalf("GET %s/%s: %d %s", kind, first["id"], r.StatusCode, r.body)
		}
		if got := r.json(t); got["id"] != first["id"] {
			t.Errorf("GET %s/%s answered %v", kind, first["id"], got["id"])
		}
	}
	docs := pageAll(t, g, tok, "/v1/documents", 200)
	kinds := map[string]bool{}
	for _, d := range docs {
		loc := d["location"].(map[string]any)
		if loc["provider"] == "" || loc["path"] == "" || loc["item_id"] == "" {
			t.Fatalf("document %v has an incomplete location %v", d["id"], loc)
		}
		for _, field := range []string{"content", "bytes", "data", "body"} {
			if _, ok := d[field]; ok {
				t.Fatalf("document %v carries %q: documents never carry file content", d["id"], field)
			}
		}
		kinds[d["kind"].(string)] = true
	}
	if !kinds["engagement_letter"] || !kinds["signed_engagement_letter"] {
		t.Errorf("document kinds seen: %v", kinds)
	}
}

func TestWrites(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	owner := g.do(t, "GET", "/v1/people?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)

	r := g.do(t, "POST", "/v1/clients", tok, map[string]any{
		"name": "Hollis & Wray Ltd", "type": "company", "owner": owner,
		"contacts": []map[string]any{{"name": "Dana Hollis", "role": "primary", "email": "dana@hollis.example"}},
	})
	if r.StatusCode != 201 {
		t.Fatalf("create client: %d %s", r.StatusCode, r.body)
	}
	created := r.json(t)
	id := created["id"].(string)
	if !strings.HasPrefix(id, "cli_") || created["owner"] != owner || len(created["contacts"].([]any)) != 1 {
		t.Fatalf("created client: %s", r.body)
	}
	r = g.do(t, "PATCH", "/v1/clients/"+id, tok, map[string]any{"status": "inactive",
		"contacts": []map[string]any{{"name": "Dana Hollis", "role": "primary"}, {"name": "Sam Wray", "role": "billing"}}})
	if r.StatusCode != 200 || r.json(t)["status"] != "inactive" || len(r.json(t)["contacts"].([]any)) != 2 {
		t.Fatalf("patch client: %d %s", r.StatusCode, r.body)
	}
	if got := g.do(t, "GET", "/v1/clients/"+id, tok, nil).json(t); got["name"] != "Hollis & Wray Ltd" || got["status"] != "inactive" {
		t.Fatalf("client after patch: %v", got)
	}

	r = g.do(t, "POST", "/v1/jobs", tok, map[string]any{"title": "Year-end accounts 2026", "client": id, "deadline": "2027-01-31"})
	if r.StatusCode != 201 {
		t.Fatalf("create job: %d %s", r.StatusCode, r.body)
	}
	job := r.json(t)
	jobID := job["id"].(string)
	if job["stage"] != "planned" || job["client"] != id {
		t.Fatalf("created job: %s", r.body)
	}
	r = g.do(t, "PATCH", "/v1/jobs/"+jobID, tok, map[string]any{"deadline": "2027-02-28"})
	if r.StatusCode != 200 || r.json(t)["deadline"] != "2027-02-28" {
		t.Fatalf("patch job: %d %s", r.StatusCode, r.body)
	}
	r = g.do(t, "POST", "/v1/jobs/"+jobID+"/stage", tok, map[string]any{"stage": "in_review", "note": "Ready for partner review"})
	if r.StatusCode != 200 || r.json(t)["stage"] != "in_review" {
		t.Fatalf("move job: %d %s", r.StatusCode, r.body)
	}
	r = g.do(t, "POST", "/v1/jobs/"+jobID+"/stage", tok, map[string]any{"stage": "completed"})
	if r.StatusCode != 200 || r.json(t)["stage"] != "completed" || r.json(t)["closed_at"] == nil {
		t.Fatalf("complete job: %d %s", r.StatusCode, r.body)
	}
	found := false
	for _, j := range pageAll(t, g, tok, "/v1/jobs?stage=completed&client="+id, 50) {
		found = found || j["id"] == jobID
	}
	if !found {
		t.Error("the completed job is missing from the stage filter")
	}

	// Writes survive a restart.
	g.restart()
	if r := g.do(t, "GET", "/v1/jobs/"+jobID, tok, nil); r.StatusCode != 200 || r.json(t)["stage"] != "completed" {
		t.Fatalf("job after restart: %d %s", r.StatusCode, r.body)
	}
}

func TestIdempotency(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	body := map[string]any{"name": "Idempotent Ltd"}
	first := g.do(t, "POST", "/v1/clients", tok, body, "Idempotency-Key", "key-1")
	if first.StatusCode != 201 {
		t.Fatalf("first: %d %s", first.StatusCode, first.body)
	}
	again := g.do(t, "POST", "/v1/clients", tok, body, "Idempotency-Key", "key-1")
	if again.StatusCode != 201 || string(again.body) != string(first.body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s (first %s)", again.StatusCode, again.body, first.body)
	}
	other := g.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Other Ltd"}, "Idempotency-Key", "key-1")
	if other.StatusCode != 422 || other.errorCode(t) != "idempotency_key_reused" {
		t.Fatalf("reuse: %d %s", other.StatusCode, other.body)
	}
	// An error answer is replayed too, so a retry cannot turn into a
	// different outcome.
	bad := g.do(t, "POST", "/v1/jobs/job_00000000000000000000000000/stage", tok, map[string]any{"stage": "filed"}, "Idempotency-Key", "key-2")
	if bad.StatusCode != 404 {
		t.Fatalf("bad: %d %s", bad.StatusCode, bad.body)
	}
	if again := g.do(t, "POST", "/v1/jobs/job_00000000000000000000000000/stage", tok, map[string]any{"stage": "filed"}, "Idempotency-Key", "key-2"); again.StatusCode != 404 || string(again.body) != string(bad.body) {
		t.Fatalf("replayed error: %d %s", again.StatusCode, again.body)
	}
	// Keys belong to a credential.
	tok2 := g.issue("frm_acme", false, allReadWrite...).Token
	if r := g.do(t, "POST", "/v1/clients", tok2, map[string]any{"name": "Other Ltd"}, "Idempotency-Key", "key-1"); r.StatusCode != 201 {
		t.Fatalf("another credential's key: %d %s", r.StatusCode, r.body)
	}
	// Concurrent retries of one write create one record.
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = g.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Race Ltd"}, "Idempotency-Key", "race").StatusCode
		}()
	}
	wg.Wait()
	n := 0
	for _, c := range pageAll(t, g, tok, "/v1/clients", 200) {
		if c["name"] == "Race Ltd" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("concurrent retries created %d clients (answers %v)", n, codes)
	}
	for _, c := range codes {
		if c != 201 && c != 409 {
			t.Fatalf("concurrent retry answered %d", c)
		}
	}
}

func TestPagingUnderConcurrentWrites(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	before := pageAll(t, g, tok, "/v1/jobs", 200)
	clientID := before[0]["client"].(string)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		stages := []string{"in_progress", "in_review", "awaiting_client"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			g.do(t, "POST", "/v1/jobs", tok, map[string]any{"title": fmt.Sprintf("Concurrent %d", i), "client": clientID})
			target := before[(i*37)%len(before)]["id"].(string)
			g.do(t, "POST", "/v1/jobs/"+target+"/stage", tok, map[string]any{"stage": stages[i%3]})
		}
	}()
	during := pageAll(t, g, tok, "/v1/jobs", 17)
	close(stop)
	wg.Wait()

	seen := map[string]int{}
	for _, j := range during {
		seen[j["id"].(string)]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s seen %d times", id, n)
		}
	}
	for _, j := range before {
		if seen[j["id"].(string)] != 1 {
			t.Errorf("%s skipped while paging under writes", j["id"])
		}
	}
}

func TestRequestIDOnEveryResponse(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, "jobs:read").Token
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/v1/jobs", tok}, {"GET", "/v1/jobs", ""}, {"GET", "/v1/clients", tok},
		{"GET", "/v2/jobs", ""}, {"GET", "/v1/openapi.json", ""}, {"DELETE", "/v1/jobs", tok},
	} {
		r := g.do(t, c.method, c.path, c.token, nil)
		if !strings.HasPrefix(r.Header.Get("Request-Id"), "req_") {
			t.Errorf("%s %s: Request-Id %q", c.method, c.path, r.Header.Get("Request-Id"))
		}
		if r.StatusCode >= 400 {
			if e := r.json(t)["error"].(map[string]any); e["request_id"] != r.Header.Get("Request-Id") {
				t.Errorf("%s %s: body request_id %v, header %s", c.method, c.path, e["request_id"], r.Header.Get("Request-Id"))
			}
		}
	}
}

var _ = http.MethodGet

func TestAccessLogNamesTheCredential(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	c := g.issue("frm_acme", false, "jobs:read")
	g.do(t, "GET", "/v1/jobs?limit=1", c.Token, nil)
	eventually.True(t, 5*time.Second, 50*time.Millisecond, "an access log line naming "+c.ID, func() bool {
		for _, line := range strings.Split(g.logs.String(), "\n") {
			if strings.Contains(line, `"logger":"http.log.access`) && strings.Contains(line, `"user_id":"`+c.ID+`"`) {
				if strings.Contains(line, c.Token) || strings.Contains(line, c.Token[len(c.Token)-20:]) {
					t.Fatalf("the access log carries the token: %s", line)
				}
				return true
			}
		}
		return false
	})
}
