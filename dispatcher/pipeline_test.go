package dispatcher_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
)

// Each event kind goes all the way: Ingest, a signed POST to a real
// receiver, the signature checked by an independent verifier.
func TestEveryKindEndToEnd(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		all := newReceiver(t, nil)
		alias := newReceiver(t, nil)
		allEP, allSecret := h.endpoint(live, all.URL(), "*")
		_, aliasSecret := h.endpoint(live, alias.URL(), dispatcher.EngagementLetterSign)

		at := time.Date(2026, 3, 14, 10, 0, 0, 123456789, time.UTC)
		ch := func(id string, kind practice.Kind, before, after string) practice.Change {
			c := practice.Change{ID: id, Firm: live.Firm, Kind: kind, After: json.RawMessage(after), OccurredAt: at}
			if before != "" {
				c.Before = json.RawMessage(before)
			}
			return c
		}
		tests := []struct {
			kind   string
			change practice.Change
			ids    map[string]string
		}{
			{dispatcher.ClientCreated, ch("c1", practice.Clients, "", `{"id":"cli_1","name":"A"}`), map[string]string{"client_id": "cli_1"}},
			{dispatcher.ClientUpdated, ch("c2", practice.Clients, `{"id":"cli_1","name":"A"}`, `{"id":"cli_1","name":"B"}`), map[string]string{"client_id": "cli_1"}},
			{dispatcher.EngagementCreated, ch("c3", practice.Engagements, "", `{"id":"eng_1","client":"cli_1","status":"sent"}`), map[string]string{"engagement_id": "eng_1"}},
			{dispatcher.EngagementSigned, ch("c4", practice.Engagements, `{"id":"eng_1","client":"cli_1","status":"sent"}`,
				`{"id":"eng_1","client":"cli_1","status":"signed","released_jobs":["job_1"]}`), map[string]string{"engagement_id": "eng_1", "client_id": "cli_1"}},
			{dispatcher.JobOpened, ch("c5", practice.Jobs, "", `{"id":"job_1","client":"cli_1","stage":"planned"}`), map[string]string{"job_id": "job_1"}},
			{dispatcher.JobStageChanged, ch("c6", practice.Jobs, `{"id":"job_1","stage":"planned"}`, `{"id":"job_1","stage":"in_review"}`),
				map[string]string{"job_id": "job_1", "previous_stage": "planned", "stage": "in_review"}},
			{dispatcher.JobClosed, ch("c7", practice.Jobs, `{"id":"job_1","stage":"in_review"}`, `{"id":"job_1","stage":"completed"}`), map[string]string{"job_id": "job_1"}},
			{dispatcher.DocumentFiled, ch("c8", practice.Documents, "", `{"id":"doc_1","client":"cli_1"}`), map[string]string{"document_id": "doc_1"}},
			{dispatcher.InvoiceRaised, ch("c9", practice.Invoices, "", `{"id":"inv_1","client":"cli_1","status":"issued"}`), map[string]string{"invoice_id": "inv_1"}},
			{dispatcher.InvoicePaid, ch("c10", practice.Invoices, `{"id":"inv_1","status":"issued"}`, `{"id":"inv_1","status":"paid","settled_via":"bacs"}`),
				map[string]string{"invoice_id": "inv_1", "settled_via": "bacs"}},
		}
		var latencies []time.Duration
		for _, tt := range tests {
			t.Run(tt.kind, func(t *testing.T) {
				start := time.Now()
				h.ingest(tt.change)
				var req request
				eventually.True(t, waitWithin, waitTick, tt.kind+" at the receiver", func() bool {
					for _, r := range all.requests() {
						if env := decode(t, r.body); env.Event == tt.kind {
							req = r
							return true
						}
					}
					return false
				})
				latencies = append(latencies, req.at.Sub(start))
				if err := verifyStandardWebhook(allSecret, req.header, req.body, h.clock.Now()); err != nil {
					t.Fatalf("signature: %v", err)
				}
				env := decode(t, req.body)
				if req.header.Get("webhook-id") != env.ID || !strings.HasPrefix(env.ID, "evt_") {
					t.Errorf("webhook-id %q, envelope id %q", req.header.Get("webhook-id"), env.ID)
				}
				if env.OccurredAt != "2026-03-14T10:00:00.123Z" || env.Firm != live.Firm || env.Sandbox {
					t.Errorf("envelope %+v", env)
				}
				if ct, ua := req.header.Get("Content-Type"), req.header.Get("User-Agent"); ct != "application/json" || ua != "practicegw-webhooks/1" {
					t.Errorf("content-type %q, user-agent %q", ct, ua)
				}
				var data map[string]any
				json.Unmarshal(env.Data, &data)
				for k, v := range tt.ids {
					if data[k] != v {
						t.Errorf("data.%s = %v, want %s", k, data[k], v)
					}
				}
				if _, ok := data["object"].(map[string]any); !ok {
					t.Errorf("data.object missing: %s", env.Data)
				}
			})
		}

		// The alias subscriber got the signing, same id, under the alias name.
		eventually.True(t, waitWithin, waitTick, "the alias delivery", func() bool { return alias.count() == 1 })
		got := alias.requests()[0]
		env := decode(t, got.body)
		signed := dispatcher.EventID("c4", dispatcher.EngagementSigned, at)
		if env.Event != dispatcher.EngagementLetterSign || env.ID != signed {
			t.Fatalf("alias endpoint got %s %s, want %s %s", env.Event, env.ID, dispatcher.EngagementLetterSign, signed)
		}
		if err := verifyStandardWebhook(aliasSecret, got.header, got.body, h.clock.Now()); err != nil {
			t.Fatalf("alias signature: %v", err)
		}
		// c7 raised job.stage_changed as well as job.closed.
		if n := len(h.deliveries(allEP.ID)); n != len(tests)+1 {
			t.Errorf("%d deliveries to the * endpoint, want %d", n, len(tests)+1)
		}
		slices.Sort(latencies)
		t.Logf("Ingest to receiver: median %s, max %s", latencies[len(latencies)/2], latencies[len(latencies)-1])
		if latencies[len(latencies)/2] > time.Second {
			t.Errorf("median delivery latency %s; the contract intends under a second", latencies[len(latencies)/2])
		}
	})
}

func TestFiveFailuresThenSuccess(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n <= 5 {
				w.WriteHeader(http.StatusInternalServerError)
				w.Write([]byte(`{"error":"database unavailable"}`))
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.only(ep.ID)
		schedule := dispatcher.Schedule{Base: dispatcher.DefaultBackoffBase, Factor: dispatcher.DefaultBackoffFactor}

		for n := 1; n <= 5; n++ {
			d = h.waitAttempts(d.ID, n)
			a := d.Attempts[n-1]
			if d.State != dispatcher.StateRetrying || a.ResponseCode != 500 || a.Trigger != dispatcher.TriggerScheduled {
				t.Fatalf("after attempt %d: state %s, attempt %+v", n, d.State, a)
			}
			if a.ResponseExcerpt != `{"error":"database unavailable"}` || a.Error == "" {
				t.Errorf("attempt %d excerpt %q error %q", n, a.ResponseExcerpt, a.Error)
			}
			wait := d.NextAttemptAt.Sub(a.StartedAt)
			if lo := schedule.MinDelay(n); wait < lo || wait >= lo+lo/5 {
				t.Errorf("retry %d after %s, want in [%s, %s)", n, wait, lo, lo+lo/5)
			}
			h.due(d)
		}
		d = h.waitAttempts(d.ID, 6)
		if d.State != dispatcher.StateDelivered || !d.NextAttemptAt.IsZero() {
			t.Fatalf("state %s next %s, want delivered", d.State, d.NextAttemptAt)
		}
		last := d.Attempts[5]
		if last.Number != 6 || last.ResponseCode != 200 || last.Error != "" || last.Label() != "attempt 6 of 6" {
			t.Fatalf("last attempt %+v (%s)", last, last.Label())
		}
		// Same event id on every attempt; fresh timestamps.
		reqs := rc.requests()
		for _, r := range reqs {
			if r.header.Get("webhook-id") != d.EventID {
				t.Fatalf("webhook-id %q, want %q", r.header.Get("webhook-id"), d.EventID)
			}
		}
		if reqs[0].header.Get("webhook-timestamp") == reqs[5].header.Get("webhook-timestamp") {
			t.Error("the timestamp was not refreshed between attempts")
		}
	})
}

func TestSixFailuresThenReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n <= 6 {
				w.WriteHeader(http.StatusBadGateway)
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.only(ep.ID)
		for n := 1; n <= 5; n++ {
			d = h.waitAttempts(d.ID, n)
			h.due(d)
		}
		d = h.waitAttempts(d.ID, 6)
		if d.State != dispatcher.StateFailed || !d.NextAttemptAt.IsZero() {
			t.Fatalf("after six failures: state %s, next %s", d.State, d.NextAttemptAt)
		}
		// Nothing more is scheduled, however long we wait.
		h.settled(d.ID)
		if rc.count() != 6 {
			t.Fatalf("%d requests after failing, want 6", rc.count())
		}

		got, err := h.eng.Replay(h.ctx, live, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != dispatcher.StateDelivered || len(got.Attempts) != 7 {
			t.Fatalf("after replay: state %s with %d attempts", got.State, len(got.Attempts))
		}
		for i, a := range got.Attempts {
			want := dispatcher.TriggerScheduled
			if i == 6 {
				want = dispatcher.TriggerReplay
			}
			if a.Number != i+1 || a.Trigger != want {
				t.Errorf("attempt %d: number %d trigger %s, want %s", i+1, a.Number, a.Trigger, want)
			}
		}
		if l := got.Attempts[6].Label(); l != "attempt 7 (replay)" {
			t.Errorf("label %q", l)
		}
		if r := rc.requests()[6]; r.header.Get("webhook-id") != d.EventID {
			t.Errorf("replay webhook-id %q, want %q", r.header.Get("webhook-id"), d.EventID)
		}
		// Another tenant cannot replay it.
		if _, err := h.eng.Replay(h.ctx, sandbox, d.ID); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("cross-tenant replay: %v", err)
		}
	})
}

func TestReplayOfAFailingDeliveryEndsItsSchedule(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, status(http.StatusInternalServerError))
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.waitAttempts(h.only(ep.ID).ID, 1)

		got, err := h.eng.Replay(h.ctx, live, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != dispatcher.StateFailed || len(got.Attempts) != 2 || got.Attempts[1].Trigger != dispatcher.TriggerReplay {
			t.Fatalf("after a failed replay: %s with %+v", got.State, got.Attempts)
		}
		h.settled(d.ID)
		if rc.count() != 2 {
			t.Fatalf("%d requests, want 2: the schedule should have ended", rc.count())
		}
	})
}

func TestReplayFailedSince(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		var healthy atomic.Bool
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			if !healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		since := h.clock.Now()
		for range 3 {
			h.ingest(clientChange(live))
		}
		eventually.True(t, waitWithin, waitTick, "three deliveries", func() bool { return len(h.deliveries(ep.ID)) == 3 })
		for n := 1; n <= 6; n++ {
			eventually.True(t, waitWithin, waitTick, "attempts", func() bool {
				for _, d := range h.deliveries(ep.ID) {
					if len(d.Attempts) < n {
						return false
					}
				}
				return true
			})
			h.clock.Advance(24 * time.Hour)
			h.eng.Kick()
		}
		for _, d := range h.deliveries(ep.ID) {
			if d.State != dispatcher.StateFailed {
				t.Fatalf("delivery %s is %s", d.ID, d.State)
			}
		}

		healthy.Store(true)
		n, err := h.eng.ReplayFailed(h.ctx, live, ep.ID, since)
		if err != nil || n != 3 {
			t.Fatalf("ReplayFailed = %d, %v; want 3", n, err)
		}
		eventually.True(t, waitWithin, waitTick, "replays delivered", func() bool {
			for _, d := range h.deliveries(ep.ID) {
				if d.State != dispatcher.StateDelivered {
					return false
				}
			}
			return true
		})
		for _, d := range h.deliveries(ep.ID) {
			if len(d.Attempts) != 7 || d.Attempts[6].Trigger != dispatcher.TriggerReplay {
				t.Errorf("delivery %s attempts %+v", d.ID, d.Attempts)
			}
		}
		// Nothing failed is left to replay.
		if n, err := h.eng.ReplayFailed(h.ctx, live, ep.ID, since); err != nil || n != 0 {
			t.Errorf("second ReplayFailed = %d, %v", n, err)
		}
	})
}
