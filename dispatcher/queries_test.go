package dispatcher_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
)

func TestListEventsPagesAndFilters(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		var want []string
		for i := range 7 {
			kind, after := practice.Clients, `{"id":"cli_x"}`
			if i%2 == 1 {
				kind, after = practice.Jobs, `{"id":"job_x","stage":"planned"}`
			}
			c := practice.Change{ID: "chg_q" + string(rune('a'+i)), Firm: live.Firm, Kind: kind,
				After: json.RawMessage(after), OccurredAt: base.Add(time.Duration(i) * time.Hour)}
			h.ingest(c)
			evs, _ := dispatcher.Derive(c)
			want = append(want, evs[0].ID)
		}

		var got []string
		q := dispatcher.EventQuery{Tenant: live, Limit: 3}
		for pages := 0; ; pages++ {
			page, err := h.eng.ListEvents(h.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range page.Events {
				got = append(got, ev.ID)
			}
			if !page.HasMore {
				if pages != 2 {
					t.Errorf("%d pages, want 3", pages+1)
				}
				break
			}
			q.Cursor = page.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("paged ids\n%v\nwant\n%v", got, want)
		}

		tests := []struct {
			name string
			q    dispatcher.EventQuery
			want []string
		}{
			{"by kind", dispatcher.EventQuery{Tenant: live, Kinds: []string{dispatcher.JobOpened}}, []string{want[1], want[3], want[5]}},
			{"from", dispatcher.EventQuery{Tenant: live, From: base.Add(5 * time.Hour)}, want[5:]},
			{"to is exclusive", dispatcher.EventQuery{Tenant: live, To: base.Add(2 * time.Hour)}, want[:2]},
			{"window and kind", dispatcher.EventQuery{Tenant: live, From: base.Add(time.Hour), To: base.Add(4 * time.Hour),
				Kinds: []string{dispatcher.ClientCreated}}, []string{want[2]}},
			{"another tenant", dispatcher.EventQuery{Tenant: sandbox}, nil},
		}
		for _, tt := range tests {
			page, err := h.eng.ListEvents(h.ctx, tt.q)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			var ids []string
			for _, ev := range page.Events {
				ids = append(ids, ev.ID)
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, ids, tt.want)
			}
		}

		for name, q := range map[string]dispatcher.EventQuery{
			"limit 0 is the default, 201 is refused": {Tenant: live, Limit: 201},
			"unknown kind":                           {Tenant: live, Kinds: []string{"client.removed"}},
		} {
			var invalid *practice.InvalidError
			if _, err := h.eng.ListEvents(h.ctx, q); !errors.As(err, &invalid) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := h.eng.ListEvents(h.ctx, dispatcher.EventQuery{Tenant: live, Cursor: "bogus"}); !errors.Is(err, practice.ErrInvalidCursor) {
			t.Errorf("bogus cursor: %v", err)
		}
		ev, err := h.eng.GetEvent(h.ctx, live, want[0])
		if err != nil || ev.ID != want[0] || ev.ResourceID != "cli_x" {
			t.Errorf("GetEvent = %+v, %v", ev, err)
		}
	})
}

func TestDeliveryLogQueriesAndExports(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n%2 == 0 {
				w.WriteHeader(http.StatusInternalServerError)
				w.Write([]byte("oops, \"quoted\",\nnewline"))
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		for range 5 {
			h.ingest(clientChange(live))
			h.clock.Advance(time.Second)
		}
		eventually.True(t, waitWithin, waitTick, "five attempts", func() bool {
			n := 0
			for _, d := range h.deliveries(ep.ID) {
				n += len(d.Attempts)
			}
			return n == 5
		})

		var ids []string
		q := dispatcher.DeliveryQuery{EndpointID: ep.ID, Limit: 2}
		for {
			page, err := h.eng.ListDeliveries(h.ctx, live, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Deliveries {
				ids = append(ids, d.ID)
			}
			if !page.HasMore {
				break
			}
			q.Cursor = page.Next
		}
		all := h.deliveries(ep.ID)
		if len(ids) != 5 || ids[0] != all[0].ID || ids[4] != all[4].ID {
			t.Fatalf("paged %v", ids)
		}
		retrying, err := h.eng.ListDeliveries(h.ctx, live, dispatcher.DeliveryQuery{EndpointID: ep.ID, States: []dispatcher.State{dispatcher.StateRetrying}})
		if err != nil || len(retrying.Deliveries) != 2 {
			t.Fatalf("retrying deliveries: %d, %v", len(retrying.Deliveries), err)
		}
		window, _ := h.eng.ListDeliveries(h.ctx, live, dispatcher.DeliveryQuery{EndpointID: ep.ID,
			From: all[1].CreatedAt, To: all[3].CreatedAt})
		if len(window.Deliveries) != 2 || window.Deliveries[0].ID != all[1].ID {
			t.Fatalf("time window: %d deliveries", len(window.Deliveries))
		}
		if _, err := h.eng.ListDeliveries(h.ctx, sandbox, dispatcher.DeliveryQuery{EndpointID: ep.ID}); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("another tenant listed the log: %v", err)
		}
		if _, err := h.eng.GetDelivery(h.ctx, sandbox, all[0].ID); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("another tenant read a delivery: %v", err)
		}
		if _, err := h.eng.ListDeliveries(h.ctx, live, dispatcher.DeliveryQuery{EndpointID: ep.ID, Cursor: "nope"}); !errors.Is(err, practice.ErrInvalidCursor) {
			t.Errorf("bogus cursor: %v", err)
		}

		// The API form of a delivery is the contract's.
		raw, _ := json.Marshal(all[1])
		var shape map[string]any
		json.Unmarshal(raw, &shape)
		for _, k := range []string{"id", "event_id", "event", "endpoint_id", "state", "attempts"} {
			if _, ok := shape[k]; !ok {
				t.Errorf("delivery JSON lacks %q: %s", k, raw)
			}
		}
		attempt := shape["attempts"].([]any)[0].(map[string]any)
		for _, k := range []string{"number", "trigger", "started_at", "duration_ms", "response_code", "error", "response_excerpt"} {
			if _, ok := attempt[k]; !ok {
				t.Errorf("attempt JSON lacks %q: %s", k, raw)
			}
		}
		if _, ok := shape["firm"]; ok {
			t.Errorf("delivery JSON exposes the firm: %s", raw)
		}

		var nd bytes.Buffer
		if err := h.eng.ExportNDJSON(h.ctx, live, dispatcher.ExportQuery{EndpointID: ep.ID}, &nd); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(&nd)
		lines := 0
		for sc.Scan() {
			var d dispatcher.Delivery
			if err := json.Unmarshal(sc.Bytes(), &d); err != nil || len(d.Attempts) != 1 {
				t.Fatalf("ndjson line %q: %v", sc.Text(), err)
			}
			lines++
		}
		if lines != 5 {
			t.Fatalf("%d ndjson lines, want 5", lines)
		}

		var cb bytes.Buffer
		if err := h.eng.ExportCSV(h.ctx, live, dispatcher.ExportQuery{EndpointID: ep.ID, From: all[2].CreatedAt}, &cb); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&cb).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rows[0], dispatcher.CSVHeader()) || len(rows) != 4 {
			t.Fatalf("csv header %v and %d rows", rows[0], len(rows))
		}
		for _, r := range rows[1:] {
			if r[5] != "1" || r[6] != "scheduled" || (r[9] != "200" && r[9] != "500") {
				t.Errorf("csv row %v", r)
			}
			if r[9] == "500" && !strings.Contains(r[10], "500 Internal Server Error") {
				t.Errorf("csv error column %q", r[10])
			}
		}
	})
}

func TestEndpointManagement(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		ep, secret, err := h.eng.CreateEndpoint(h.ctx, live, dispatcher.EndpointInput{
			URL: "http://127.0.0.1:9/hooks", Events: []string{dispatcher.JobOpened, dispatcher.JobOpened, dispatcher.EngagementLetterSign},
			Description: "ledger sync",
		})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if !strings.HasPrefix(secret, "whsec_") || err != nil || len(raw) < 24 || len(raw) > 32 {
			t.Fatalf("secret %q decodes to %d bytes (%v)", secret, len(raw), err)
		}
		if !strings.HasPrefix(ep.ID, "we_") || ep.Status != dispatcher.EndpointEnabled ||
			!slices.Equal(ep.Events, []string{dispatcher.JobOpened, dispatcher.EngagementLetterSign}) {
			t.Fatalf("created %+v", ep)
		}
		body, _ := json.Marshal(ep)
		if strings.Contains(string(body), strings.TrimPrefix(secret, "whsec_")) || strings.Contains(string(body), "frm_acme") {
			t.Fatalf("endpoint JSON exposes the secret or firm: %s", body)
		}

		invalid := []dispatcher.EndpointInput{
			{URL: "", Events: []string{"*"}},
			{URL: "http://10.0.0.1/", Events: []string{"*"}},
			{URL: "http://127.0.0.1/", Events: nil},
			{URL: "http://127.0.0.1/", Events: []string{"client.removed"}},
			{URL: "http://127.0.0.1/", Events: []string{"*"}, Description: strings.Repeat("d", 501)},
		}
		for _, in := range invalid {
			var ie *practice.InvalidError
			if _, _, err := h.eng.CreateEndpoint(h.ctx, live, in); !errors.As(err, &ie) {
				t.Errorf("CreateEndpoint(%+v) = %v, want a parameter error", in, err)
			}
		}

		url, events, desc := "http://127.0.0.1:10/hooks", []string{"*"}, "everything"
		up, err := h.eng.UpdateEndpoint(h.ctx, live, ep.ID, dispatcher.EndpointUpdate{URL: &url, Events: &events, Description: &desc})
		if err != nil || up.URL != url || !slices.Equal(up.Events, events) || up.Description != desc || !up.UpdatedAt.Equal(h.clock.Now()) {
			t.Fatalf("UpdateEndpoint = %+v, %v", up, err)
		}
		bad := "http://192.168.0.1/"
		if _, err := h.eng.UpdateEndpoint(h.ctx, live, ep.ID, dispatcher.EndpointUpdate{URL: &bad}); err == nil {
			t.Error("an update to a private address was allowed")
		}
		if _, err := h.eng.UpdateEndpoint(h.ctx, sandbox, ep.ID, dispatcher.EndpointUpdate{Description: &desc}); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("another tenant updated the endpoint: %v", err)
		}
		if _, _, err := h.eng.RotateSecret(h.ctx, sandbox, ep.ID); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("another tenant rotated the secret: %v", err)
		}

		second, _ := h.endpoint(live, "http://127.0.0.1:11/hooks")
		list, err := h.eng.ListEndpoints(h.ctx, live)
		// Both were created in the same (fake) millisecond, so their order is
		// the random part's.
		if err != nil || len(list) != 2 || !slices.ContainsFunc(list, func(e dispatcher.Endpoint) bool { return e.ID == ep.ID }) ||
			!slices.ContainsFunc(list, func(e dispatcher.Endpoint) bool { return e.ID == second.ID }) {
			t.Fatalf("ListEndpoints = %v, %v", list, err)
		}
		if list, _ := h.eng.ListEndpoints(h.ctx, sandbox); len(list) != 0 {
			t.Errorf("the sandbox sees %d live endpoints", len(list))
		}

		// Deleting takes the endpoint's delivery log with it.
		h.ingest(clientChange(live))
		eventually.True(t, waitWithin, waitTick, "a delivery", func() bool { return len(h.deliveries(ep.ID)) == 1 })
		d := h.deliveries(ep.ID)[0]
		if err := h.eng.DeleteEndpoint(h.ctx, sandbox, ep.ID); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("another tenant deleted the endpoint: %v", err)
		}
		if err := h.eng.DeleteEndpoint(h.ctx, live, ep.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := h.eng.GetEndpoint(h.ctx, live, ep.ID); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("GetEndpoint after delete: %v", err)
		}
		if _, err := h.eng.GetDelivery(h.ctx, live, d.ID); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("GetDelivery after delete: %v", err)
		}
	})
}
