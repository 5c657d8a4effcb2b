package karbon_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/changes"
	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/practice"
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
		if ra, ok := upstream.RetryAfter(err); !ok || ra != time.Minute || !errors.Is(err, practice.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("outage opens the breaker, which recovers", func(t *testing.T) {
		k := fixture(t)
		a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) {
			c.Upstream.BreakerFailures, c.Upstream.BreakerTimeout, c.Upstream.MaxAttempts = 3, upstream.Duration(150*time.Millisecond), 1
		})
		k.Faults.Down(vendortest.Fault{Status: http.StatusBadGateway})
		for range 3 {
			if _, err := a.Get(ctx, live, practice.Jobs, "job_W0001"); !errors.Is(err, practice.ErrUnavailable) {
				t.Fatalf("err = %v", err)
			}
		}
		hits := k.Faults.Hits()
		_, err := a.Get(ctx, live, practice.Jobs, "job_W0001")
		if ra, _ := upstream.RetryAfter(err); !errors.Is(err, practice.ErrUnavailable) || ra <= 0 || k.Faults.Hits() != hits {
			t.Fatalf("open breaker: err = %v, retry after %v, calls %d -> %d", err, ra, hits, k.Faults.Hits())
		}
		k.Faults.Up()
		time.Sleep(200 * time.Millisecond)
		if _, err := a.Get(ctx, live, practice.Jobs, "job_W0001"); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
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
		for _, body := range []string{`{"value": [`, `<html>maintenance</html>`, `{"value":[{"WorkItemKey":"../etc"}]}`,
			`{"value":[{"WorkItemKey":"W1","StartDate":"yesterday"}]}`} {
			k := fixture(t)
			a, _ := newAdapter(t, k)
			k.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: body})
			if _, err := a.List(ctx, live, practice.Jobs, practice.Query{Limit: 10}); !errors.Is(err, practice.ErrBadUpstream) {
				t.Errorf("%s: err = %v", body, err)
			}
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
		// A burst of 120, then one every half second.
		slept := clock.Slept()
		if len(slept) != 10 || slept[0] != 500*time.Millisecond {
			t.Fatalf("slept %v", slept)
		}
	})
}
