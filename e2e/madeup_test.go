package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice/recordscan"
	sse "github.com/tmaxmax/go-sse"
)

// Nothing the real binary answers, sends or streams is made up, on a firm
// of Xero Practice Manager and SharePoint: no body of a list, a single
// read, a client created through /v1, the events, a webhook delivery or
// the event stream holds a zero time, an HTML escape of '<', '>' or '&',
// or an empty string in a field the served OpenAPI document declares
// nullable. The practice has a client with no manager, a job with no
// manager and no start date, a staff member without an email, and a file
// outside any client's folder, whose fields XPM and SharePoint cannot
// fill.
func TestNoBodyMakesAnythingUp(t *testing.T) {
	f := startXPMFirm(t)
	now := time.Now().UTC().Truncate(time.Second)
	f.x.AddStaff(vendortest.XPMStaff{UUID: xpmStaffID(9), Name: "Temp & <Agency>"})
	f.x.AddClient(vendortest.XPMClient{UUID: xpmClientID(9), Name: "Dunmore & Sons <Holdings> Ltd", Country: "United Kingdom"})
	f.x.AddJob(vendortest.XPMJob{ID: "J000009", UUID: "10b00000-0000-4000-8000-000000000009", Name: "Accounts & VAT <2026>",
		ClientUUID: xpmClientID(9), Type: "Accounts", State: "Planned", Due: now.AddDate(0, 2, 0), Created: now})
	f.x.AddQuote(vendortest.XPMQuote{ID: "Q000009", Name: "Accounts & <VAT>", State: "Issued", ClientUUID: xpmClientID(9),
		Date: now.AddDate(0, 0, -3), Amount: "100.00", Tax: "20.00", Tasks: []string{"Accounts & returns"}})
	f.g.AddFile("/Clients/Firm templates & <drafts>/Letter.docx", 12_000, "application/vnd.openxmlformats-officedocument.wordprocessingml.document", now)
	g := f.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	waitSyncs(t, g, 20*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_marlowe", false, allReadWrite...).Token

	doc := g.do(t, "GET", "/v1/openapi.json", "", nil)
	nullable, err := recordscan.FromOpenAPI(doc.body)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, body []byte) {
		t.Helper()
		recordscan.Check(t, what, body, nullable)
	}

	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "client.created", "job.stage_changed")
	rc.setSecrets(secret)
	events := openLiveStream(t, g, tok)

	// Every page of every collection, and every record read alone.
	for _, collection := range []string{"clients", "jobs", "people", "invoices", "documents", "engagements"} {
		n := 0
		next := "/v1/" + collection + "?limit=2"
		for pages := 0; next != ""; pages++ {
			if pages > 100 {
				t.Fatalf("%s: paging did not end", collection)
			}
			r := g.do(t, "GET", next, tok, nil)
			if r.StatusCode != 200 {
				t.Fatalf("GET %s: %d %s", next, r.StatusCode, r.body)
			}
			check("GET "+next, r.body)
			page := r.json(t)
			for _, item := range page["data"].([]any) {
				n++
				id := item.(map[string]any)["id"].(string)
				one := g.do(t, "GET", "/v1/"+collection+"/"+id, tok, nil)
				if one.StatusCode != 200 {
					t.Fatalf("GET /v1/%s/%s: %d %s", collection, id, one.StatusCode, one.body)
				}
				check("GET /v1/"+collection+"/"+id, one.body)
			}
			next = ""
			if cur, _ := page["next_cursor"].(string); cur != "" {
				next = "/v1/" + collection + "?limit=2&cursor=" + cur
			}
		}
		if n == 0 {
			t.Errorf("/v1/%s listed nothing to scan", collection)
		}
	}
	if c := g.do(t, "GET", "/v1/clients/cli_"+xpmClientID(9), tok, nil).json(t); c["owner"] != nil || c["created_at"] != nil ||
		c["name"] != "Dunmore & Sons <Holdings> Ltd" {
		t.Errorf("a client with no manager: %v", c)
	}

	// A client created through /v1 on XPM answers as written, and so do
	// its event, its webhook and the stream.
	r := g.do(t, "POST", "/v1/clients", tok, map[string]any{"name": "Birch & Vane <Trust>", "type": "trust"})
	if r.StatusCode != 201 {
		t.Fatalf("create client: %d %s", r.StatusCode, r.body)
	}
	check("POST /v1/clients", r.body)
	created := r.json(t)["id"].(string)
	// A job moved through /v1 raises a stage change, with the job in it.
	if r := g.do(t, "POST", "/v1/jobs/job_J000009/stage", tok, map[string]any{"stage": "awaiting_client", "note": "Waiting on the bank & <co>"}); r.StatusCode != 200 {
		t.Fatalf("move job: %d %s", r.StatusCode, r.body)
	} else {
		check("POST /v1/jobs/job_J000009/stage", r.body)
	}

	got := rc.wait(2, 15*time.Second)
	for _, d := range got {
		check("webhook "+d.id, d.body)
	}
	list := g.do(t, "GET", "/v1/events?limit=100", tok, nil)
	check("GET /v1/events", list.body)
	found := false
	for _, e := range list.json(t)["data"].([]any) {
		id := e.(map[string]any)["id"].(string)
		check("GET /v1/events/"+id, g.do(t, "GET", "/v1/events/"+id, tok, nil).body)
		obj, _ := e.(map[string]any)["data"].(map[string]any)["object"].(map[string]any)
		found = found || obj["id"] == created
	}
	if !found {
		t.Errorf("no event names the client created, %s", created)
	}
	streamed := 0
	deadline := time.After(15 * time.Second)
	for streamed < 2 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.Data == "" {
				continue
			}
			streamed++
			check("stream message "+ev.LastEventID, []byte(ev.Data))
		case <-deadline:
			t.Fatalf("%d messages streamed, want 2", streamed)
		}
	}

}

// openLiveStream opens GET /v1/events/stream?live=true on g with a live
// credential and reads its messages into a channel, closed when the
// stream ends.
func openLiveStream(t *testing.T, g *gateway, token string) <-chan sse.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.addr+"/v1/events/stream?live=true", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	events := make(chan sse.Event, 100)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		for ev, err := range sse.Read(resp.Body, nil) {
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	return events
}
