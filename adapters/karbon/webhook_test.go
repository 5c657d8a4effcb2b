package karbon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

func deliver(h http.Handler, body []byte, sig string) int {
	r := httptest.NewRequest(http.MethodPost, "/ingest/karbon", strings.NewReader(string(body)))
	if sig != "" {
		r.Header.Set("Signature", sig)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// backfilled is an adapter whose state store holds what its List gives
// for every record of kinds, as the read model's backfill leaves it before
// any webhook is compared with it.
func backfilled(t *testing.T, k *vendortest.Karbon, kinds ...practice.Kind) *karbon.Adapter {
	t.Helper()
	state := changes.NewMemoryState()
	a, _ := newAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.State = state })
	for _, kind := range kinds {
		for _, raw := range vendortest.ListAll(t, a, live, kind, practice.Filter{}, 200) {
			var v struct{ ID string }
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			if err := state.Save(context.Background(), changes.StateKey(live, kind, v.ID), raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	return a
}

func TestWebhookWorkItemMoved(t *testing.T) {
	k := fixture(t)
	// The gateway starts watching the firm: its backfill remembers every
	// work item.
	a := backfilled(t, k, practice.Jobs)
	s := &sink{}
	h := a.Webhook(s)
	key := "karbon-signing-key-0001"
	// Someone moves one in Karbon.
	k.MoveWorkItem("W0002", "InProgress", "In Review")
	body := vendortest.KarbonWebhook("Work", "W0002", "Updated", epoch.Add(time.Hour))
	if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	// Karbon delivers the same notification again.
	if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	got := s.all()
	if len(got) != 1 {
		t.Fatalf("%d changes, want 1", len(got))
	}
	c := got[0]
	var before, after practice.Job
	json.Unmarshal(c.Before, &before)
	json.Unmarshal(c.After, &after)
	if c.Kind != practice.Jobs || c.ResourceID != "job_W0002" || c.Firm != "frm_acme" || before.Stage != "in_progress" ||
		after.Stage != "in_review" || !c.OccurredAt.Equal(epoch.Add(time.Hour)) || !strings.HasPrefix(c.ID, "chg_") {
		t.Fatalf("change %+v (%s -> %s)", c, before.Stage, after.Stage)
	}
}

func TestWebhookFirstSight(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	s := &sink{}
	h := a.Webhook(s)
	key := "karbon-signing-key-0001"
	// An update of a work item never seen: remembered, not announced as
	// a new job.
	body := vendortest.KarbonWebhook("Work", "W0003", "Updated", epoch)
	deliver(h, body, vendortest.SignKarbon(key, body))
	if len(s.all()) != 0 {
		t.Fatal("a long-existing job was announced")
	}
	k.MoveWorkItem("W0003", "Completed", "")
	body = vendortest.KarbonWebhook("Work", "W0003", "Updated", epoch.Add(time.Hour))
	deliver(h, body, vendortest.SignKarbon(key, body))
	// A work item Karbon reports as inserted is new.
	k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: "W9999", Title: "New", AssigneeKey: "U1partner", ClientKey: "C001",
		ClientType: "Contact", StartDate: epoch.Format(time.RFC3339), PrimaryStatus: "Planned"})
	body = vendortest.KarbonWebhook("Work", "W9999", "Inserted", epoch)
	deliver(h, body, vendortest.SignKarbon(key, body))
	got := s.all()
	if len(got) != 2 || got[0].Before == nil || got[1].Before != nil || got[1].ResourceID != "job_W9999" {
		t.Fatalf("changes %+v", got)
	}
}

// A record the backfill listed and a webhook then reads in full is the
// same record: nothing is published, even for a notification that calls
// it inserted (which, for a record never seen, would be).
func TestWebhookAfterBackfillOfClientsAndPeople(t *testing.T) {
	k := fixture(t)
	a := backfilled(t, k, practice.Clients, practice.People, practice.Jobs)
	s := &sink{}
	body := vendortest.KarbonWebhook("Contact", "O004", "Updated", epoch)
	deliver(a.Webhook(s), body, vendortest.SignKarbon("karbon-signing-key-0001", body))
	if len(s.all()) != 0 {
		t.Fatal("an unchanged client was published")
	}
	for _, n := range []struct{ typ, key string }{{"Contact", "O004"}, {"Contact", "C003"}, {"Contact", "G001"},
		{"User", "U3staff"}, {"Work", "W0002"}} {
		body := vendortest.KarbonWebhook(n.typ, n.key, "Inserted", epoch)
		if code := deliver(a.Webhook(s), body, vendortest.SignKarbon("karbon-signing-key-0001", body)); code != http.StatusOK {
			t.Fatalf("%s %s: status %d", n.typ, n.key, code)
		}
	}
	for _, c := range s.all() {
		t.Errorf("an unchanged record was published: %s, before %s, after %s", c.ResourceID, c.Before, c.After)
	}
}

func TestWebhookContactAndUser(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	s := &sink{}
	h := a.Webhook(s)
	key := "karbon-signing-key-0001"
	for _, n := range []struct{ typ, key string }{{"Contact", "O004"}, {"Contact", "G001"}, {"User", "U3staff"},
		{"Contact", "C009"}, {"Work", "GONE"}, {"Note", "N1"}} {
		body := vendortest.KarbonWebhook(n.typ, n.key, "Inserted", epoch)
		if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
			t.Fatalf("%s %s: status %d", n.typ, n.key, code)
		}
	}
	var ids []string
	for _, c := range s.all() {
		ids = append(ids, c.ResourceID)
	}
	if strings.Join(ids, " ") != "cli_o-O004 cli_g-G001 usr_U3staff" {
		t.Fatalf("changes for %v", ids)
	}
}

func TestWebhookForgeryRefused(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	s := &sink{}
	h := a.Webhook(s)
	body := vendortest.KarbonWebhook("Work", "W0002", "Updated", epoch)
	for name, sig := range map[string]string{
		"unsigned":           "",
		"wrong key":          vendortest.SignKarbon("someone-elses-key", body),
		"signature of other": vendortest.SignKarbon("karbon-signing-key-0001", []byte(`{}`)),
		"garbage":            "zzz",
	} {
		if code := deliver(h, body, sig); code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, code)
		}
	}
	unkeyed, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) { c.WebhookSigningKey = "" })
	if code := deliver(unkeyed.Webhook(s), body, vendortest.SignKarbon("", body)); code != http.StatusUnauthorized {
		t.Errorf("no signing key configured: status %d, want 401", code)
	}
	if len(s.all()) != 0 || len(k.Requests()) != 0 {
		t.Fatal("a refused webhook reached Karbon or the sink")
	}
}

func TestWebhookUpstreamDownAsksForRedelivery(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) { c.Upstream.MaxAttempts = 1 })
	k.Faults.Down(vendortest.Fault{Status: http.StatusInternalServerError, Body: `{"error":{"code":"5001","message":"Unexpected Internal Error."}}`})
	body := vendortest.KarbonWebhook("Work", "W0002", "Updated", epoch)
	if code := deliver(a.Webhook(&sink{}), body, vendortest.SignKarbon("karbon-signing-key-0001", body)); code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503 so that Karbon sends it again", code)
	}
}

func TestResilience(t *testing.T) {
	ctx := context.Background()
	t.Run("429 with Retry-After is honoured", func(t *testing.T) {
		k := fixture(t)
		a, clock := newAdapter(t, k)
		k.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "2",
			Body: `{"statusCode":"429","message":"Rate limit is exceeded. Try again in 2 seconds."}`})
		if _, err := a.Get(ctx, live, practice.Jobs, "job_W0001"); err != nil {
			t.Fatal(err)
		}
		if slept := clock.Slept(); len(slept) != 1 || slept[0] != 2*time.Second {
			t.Fatalf("slept %v, want [2s]", slept)
		}
	})
	t.Run("a long Retry-After is passed on", func(t *testing.T) {
		k := fixture(t)
		a, _ := newAdapter(t, k)
		k.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60"})
		_, err := a.Get(ctx, live, practice.Jobs, "job_W0001")
		if ra, ok := practice.RetryAfter(err); !ok || ra != time.Minute || !errors.Is(err, practice.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("outage opens the breaker, which recovers", func(t *testing.T) {
		k := fixture(t)
		// The open period passes on synctest's fake clock: Karbon answers
		// through vendortest.Serve, without a socket, so the wait for it
		// to end is skipped, not slept.
		synctest.Test(t, func(t *testing.T) { breakerRecovers(t, k) })
	})
	t.Run("a slow Karbon does not hold us past the timeout", func(t *testing.T) {
		k := fixture(t)
		a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) {
			c.Upstream.Timeout, c.Upstream.MaxAttempts = upstream.Duration(200*time.Millisecond), 1
		})
		k.Faults.Queue(vendortest.Fault{Delay: 3 * time.Second})
		start := time.Now()
		_, err := a.List(ctx, live, practice.Jobs, practice.Query{Limit: 10})
		if !errors.Is(err, practice.ErrUnavailable) || time.Since(start) > time.Second {
			t.Fatalf("err = %v after %v", err, time.Since(start))
		}
	})
	t.Run("malformed JSON is a bad upstream, not a panic", func(t *testing.T) {
		for _, body := range []string{`{"value": [`, `<html>maintenance</html>`, `{"value":[{"WorkItemKey":"../etc"}]}`} {
			k := fixture(t)
			a, _ := newAdapter(t, k)
			k.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: body})
			if _, err := a.List(ctx, live, practice.Jobs, practice.Query{Limit: 10}); !errors.Is(err, practice.ErrBadUpstream) {
				t.Errorf("%s: err = %v", body, err)
			}
		}
	})
	t.Run("a row that cannot be read is its record's alone", func(t *testing.T) {
		k := fixture(t)
		a, _ := newAdapter(t, k)
		body := `{"value":[{"WorkItemKey":"W1","StartDate":"yesterday"},{"WorkItemKey":"W2","Title":"Accounts","StartDate":"2026-03-02T09:00:00Z",` +
			`"WorkType":"Accounts","PrimaryStatus":"Planned"}]}`
		k.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: body})
		page, err := a.List(ctx, live, practice.Jobs, practice.Query{Limit: 10})
		if err != nil || len(page.Items) != 1 || len(page.Unusable) != 1 || page.Unusable[0].ID != "job_W1" ||
			!errors.Is(page.Unusable[0], practice.ErrBadUpstream) || errors.Is(page.Unusable[0], practice.ErrNotFound) {
			t.Fatalf("a page with one row unreadable: %d items, unusable %v, %v", len(page.Items), page.Unusable, err)
		}
	})
	t.Run("wrong credentials are unavailable, never a 401 to our caller", func(t *testing.T) {
		k := fixture(t)
		a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) { c.AccessKey = "wrong" })
		if _, err := a.Get(ctx, live, practice.Jobs, "job_W0001"); !errors.Is(err, practice.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the budget of 120 a minute paces calls", func(t *testing.T) {
		k := fixture(t)
		a, clock := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) { c.Upstream.RateLimit = 0 })
		for i := range 130 {
			if _, err := a.Get(ctx, live, practice.Jobs, "job_W0001"); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		// Never more than 120 in any minute: a burst of 12, then one
		// every 60s/109, so the 121st call falls after the first minute.
		slept := clock.Slept()
		interval := time.Duration((time.Minute.Microseconds()+108)/109) * time.Microsecond
		if len(slept) != 130-12 || slept[0] != interval {
			t.Fatalf("slept %d times, first %v, want %d times %v", len(slept), slept[0], 130-12, interval)
		}
		var at time.Duration
		for i, d := range slept[:120-12] {
			at += d
			if i == 120-12-1 && at >= time.Minute {
				t.Fatalf("the 120th call waited until %v", at)
			}
		}
		if at+slept[120-12] < time.Minute {
			t.Fatalf("the 121st call came %v after the first", at+slept[120-12])
		}
	})
}

// TestWebhookReplayedBodyIsNotReadAgain is issue 24's finding 6: Karbon's
// signature has no timestamp, so a captured notification verifies for
// ever. Posted again, to this instance or to another sharing its log, it
// is acknowledged without reading Karbon again; a new notification of the
// same record is read.
func TestWebhookReplayedBodyIsNotReadAgain(t *testing.T) {
	k := fixture(t)
	shared := notifications.NewMemory(nil)
	one, _ := newAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.Notifications = shared })
	two, _ := newAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.Notifications = shared })
	key := "karbon-signing-key-0001"
	body := vendortest.KarbonWebhook("Work", "W0002", "Updated", epoch)
	if code := deliver(one.Webhook(&sink{}), body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	read := len(k.Requests())
	if read == 0 {
		t.Fatal("the first delivery read nothing from Karbon")
	}
	for i := range 20 {
		h := one.Webhook(&sink{})
		if i%2 == 1 {
			h = two.Webhook(&sink{})
		}
		if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
			t.Fatalf("replay %d: status %d, want 200 (acknowledged)", i, code)
		}
	}
	if n := len(k.Requests()); n != read {
		t.Fatalf("20 replays of one body made %d more Karbon requests, want none", n-read)
	}
	// Still refused when forged, replayed or not.
	if code := deliver(one.Webhook(&sink{}), body, vendortest.SignKarbon("wrong", body)); code != http.StatusUnauthorized {
		t.Fatalf("a replayed body with a forged signature: %d", code)
	}
	later := vendortest.KarbonWebhook("Work", "W0002", "Updated", epoch.Add(time.Minute))
	if code := deliver(two.Webhook(&sink{}), later, vendortest.SignKarbon(key, later)); code != http.StatusOK || len(k.Requests()) == read {
		t.Fatalf("a new notification of the record: status %d, %d requests", code, len(k.Requests())-read)
	}
}

// TestWebhookWorkIsBounded: a body of many notifications reads each
// record once and at most webhook_max_records of them, and a delivery
// Karbon cannot answer in time is a 503 within webhook_timeout, which
// gives the body back for Karbon's redelivery.
func TestWebhookWorkIsBounded(t *testing.T) {
	key := "karbon-signing-key-0001"
	var list []json.RawMessage
	for range 500 {
		list = append(list, vendortest.KarbonWebhook("Work", "W0001", "Updated", epoch))
	}
	for i := range 40 {
		list = append(list, vendortest.KarbonWebhook("Work", fmt.Sprintf("W%04d", i+2), "Updated", epoch))
	}
	body, _ := json.Marshal(list)

	t.Run("records read", func(t *testing.T) {
		k := fixture(t)
		a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) { c.WebhookMaxRecords = 5 })
		if code := deliver(a.Webhook(&sink{}), body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		items := map[string]int{}
		for _, r := range k.Requests() {
			if _, rest, ok := strings.Cut(r, "/v3/WorkItems/"); ok {
				id, _, _ := strings.Cut(rest, "?")
				items[id]++
			}
		}
		if len(items) != 5 || items["W0001"] != 1 {
			t.Fatalf("work items read: %v; want 5, W0001 once", items)
		}
	})

	t.Run("time", func(t *testing.T) {
		k := fixture(t)
		a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) {
			c.WebhookTimeout, c.Upstream.MaxAttempts = upstream.Duration(300*time.Millisecond), 1
		})
		// Each read answers within the upstream timeout; 41 of them do not
		// within the delivery's.
		k.Faults.Down(vendortest.Fault{Delay: time.Second})
		start := time.Now()
		if code := deliver(a.Webhook(&sink{}), body, vendortest.SignKarbon(key, body)); code != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", code)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("a delivery bounded at 300ms took %s", took)
		}
		k.Faults.Up()
		read := len(k.Requests())
		if code := deliver(a.Webhook(&sink{}), body, vendortest.SignKarbon(key, body)); code != http.StatusOK || len(k.Requests()) == read {
			t.Fatalf("Karbon's redelivery after a timeout: status %d, %d requests", code, len(k.Requests())-read)
		}
	})
}

// A body naming a record twice reads it once; named as inserted anywhere
// in the body, it is announced as new.
func TestWebhookRecordNamedTwiceInOneBody(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k)
	s := &sink{}
	k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: "W9999", Title: "New", AssigneeKey: "U1partner", ClientKey: "C001",
		ClientType: "Contact", StartDate: epoch.Format(time.RFC3339), PrimaryStatus: "Planned"})
	body, _ := json.Marshal([]json.RawMessage{
		vendortest.KarbonWebhook("Work", "W9999", "Updated", epoch),
		vendortest.KarbonWebhook("Work", "W9999", "Inserted", epoch),
	})
	if code := deliver(a.Webhook(s), body, vendortest.SignKarbon("karbon-signing-key-0001", body)); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if got := s.all(); len(got) != 1 || got[0].Before != nil || got[0].ResourceID != "job_W9999" {
		t.Fatalf("changes %+v, want job_W9999 announced as new", got)
	}
}

// breakerRecovers takes Karbon down until the breaker opens, brings it
// back, and expects a call once the open period has passed.
func breakerRecovers(t *testing.T, k *vendortest.Karbon) {
	ctx := context.Background()
	a, _ := newAdapter(t, k, func(c *karbonConfig, d *upstream.Deps) {
		c.Upstream.BreakerFailures, c.Upstream.BreakerTimeout, c.Upstream.MaxAttempts = 3, upstream.Duration(150*time.Millisecond), 1
		d.Transport = vendortest.Serve{Hosts: map[string]http.Handler{strings.TrimPrefix(k.URL, "http://"): k.Handler()}}
	})
	k.Faults.Down(vendortest.Fault{Status: http.StatusBadGateway})
	for range 3 {
		if _, err := a.Get(ctx, live, practice.Jobs, "job_W0001"); !errors.Is(err, practice.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	}
	hits := k.Faults.Hits()
	_, err := a.Get(ctx, live, practice.Jobs, "job_W0001")
	if ra, _ := practice.RetryAfter(err); !errors.Is(err, practice.ErrUnavailable) || ra <= 0 || k.Faults.Hits() != hits {
		t.Fatalf("open breaker: err = %v, retry after %v, calls %d -> %d", err, ra, hits, k.Faults.Hits())
	}
	k.Faults.Up()
	time.Sleep(200 * time.Millisecond)
	if _, err := a.Get(ctx, live, practice.Jobs, "job_W0001"); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

// modelled is an adapter compared with a firm's read model, as the
// gateway opens it: the model holds what List gives for every record of
// kinds, as the backfill leaves it.
func modelled(t *testing.T, k *vendortest.Karbon, kinds ...practice.Kind) (*karbon.Adapter, *readmodel.Model) {
	t.Helper()
	store := readmodelsim.NewStore(nil)
	model := readmodel.New(readmodel.Config{Firm: live.Firm, Store: store})
	t.Cleanup(model.Close)
	rec := &changes.Recorder{State: model}
	a, clock := newAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.State, d.Recorder = model, rec })
	for _, kind := range kinds {
		model.Serve(kind, a)
	}
	if err := model.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, kind := range kinds {
		var us []readmodel.Update
		for _, raw := range vendortest.ListAll(t, a, live, kind, practice.Filter{}, 200) {
			var v struct{ ID string }
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			us = append(us, readmodel.Update{Kind: kind, ID: v.ID, Raw: raw})
		}
		if err := model.Apply(context.Background(), us); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	return a, model
}

// Karbon's Deleted notification removes the work item at once, as
// job.deleted with the copy's tombstone, where it used to wait for the
// daily reconciliation; told again, or told as an update after it, it
// raises nothing more. A contact Karbon no longer has goes the same way,
// whichever of contacts, organizations and client groups the key was.
func TestWebhookRemovalIsSeenAtOnce(t *testing.T) {
	k := fixture(t)
	a, model := modelled(t, k, practice.Jobs, practice.Clients)
	s := &sink{}
	h := a.Webhook(s)
	key := "karbon-signing-key-0001"
	post := func(body []byte) {
		t.Helper()
		if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
			t.Fatalf("status %d for %s", code, body)
		}
	}
	k.RemoveWorkItem("W0002")
	post(vendortest.KarbonWebhook("Work", "W0002", "Deleted", epoch.Add(time.Hour)))
	post(vendortest.KarbonWebhook("Work", "W0002", "Deleted", epoch.Add(time.Hour)))
	post(vendortest.KarbonWebhook("Work", "W0002", "Updated", epoch.Add(2*time.Hour)))
	k.RemoveOrganization("O004")
	post(vendortest.KarbonWebhook("Contact", "O004", "Deleted", epoch.Add(time.Hour)))
	got := s.all()
	if len(got) != 2 {
		t.Fatalf("%d changes, want the two removals: %+v", len(got), got)
	}
	for i, want := range []struct {
		kind practice.Kind
		id   string
	}{{practice.Jobs, "job_W0002"}, {practice.Clients, "cli_o-O004"}} {
		c := got[i]
		if c.Kind != want.kind || c.ResourceID != want.id || string(c.After) != "null" || c.Before == nil ||
			c.ID != changes.RemovalChange(live, want.kind, want.id, nil, epoch).ID {
			t.Errorf("change %d: %+v", i, c)
		}
		if _, err := model.Get(context.Background(), live, want.kind, want.id); !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("%s is still read from the copy: %v", want.id, err)
		}
	}
	ts, err := model.Tombstones(context.Background(), live, practice.Jobs, practice.TombstoneQuery{})
	if err != nil || len(ts) != 1 || ts[0].ID != "job_W0002" {
		t.Fatalf("tombstones of jobs: %+v, %v", ts, err)
	}
}
