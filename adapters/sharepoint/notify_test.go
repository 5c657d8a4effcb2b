package sharepoint_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice/changes"
)

// notified is a drive whose adapter subscribes to Graph's notifications
// at a receiver of its own, counting the wakes they cause.
type notified struct {
	g      *vendortest.Graph
	a      *sharepoint.Adapter
	clock  *vendortest.Clock
	woken  atomic.Int32
	state  *changes.MemoryState
	server *httptest.Server
}

func newNotified(t *testing.T) *notified {
	t.Helper()
	n := &notified{g: vendortest.NewGraph(), clock: vendortest.NewClock(time.Now()), state: changes.NewMemoryState()}
	t.Cleanup(n.g.Close)
	var h http.Handler
	n.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(n.server.Close)
	var err error
	n.a, err = sharepoint.New(sharepoint.Config{Firm: "frm_acme", DriveID: n.g.DriveID, BaseURL: n.g.URL,
		OAuth2: upstream.OAuth2Config{AccessToken: n.g.Token}, NotificationURL: n.server.URL + "/ingest/frm_acme/sharepoint",
		Upstream: upstream.Policy{RateLimit: -1, MaxAttempts: 1}},
		upstream.Deps{Clock: n.clock, State: n.state, Wake: func(context.Context) error { n.woken.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	h = n.a.Webhook(nil)
	return n
}

func (n *notified) only(t *testing.T) vendortest.GraphSubscription {
	t.Helper()
	subs := n.g.Subscriptions()
	if len(subs) != 1 {
		t.Fatalf("%d subscriptions at Graph, want one: %+v", len(subs), subs)
	}
	return subs[0]
}

// The drive's subscription is made once Graph's validation request is
// answered, on the drive's root, for updated, with a clientState of the
// gateway's and a lifecycle address; a change to the drive then wakes
// the sync, and a notification that is not the drive's subscription's
// (a forged or stale clientState) wakes nothing.
func TestSubscriptionIsMadeAndItsNotificationsWakeTheSync(t *testing.T) {
	n := newNotified(t)
	ctx := context.Background()
	until, err := n.a.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := n.only(t)
	if s.Resource != "/drives/"+n.g.DriveID+"/root" || s.ChangeType != "updated" || len(s.ClientState) != 64 ||
		s.LifecycleURL == "" || !strings.HasSuffix(s.NotificationURL, "/ingest/frm_acme/sharepoint") {
		t.Fatalf("subscription %+v", s)
	}
	if d := time.Until(until); d < 47*time.Hour || d > 49*time.Hour {
		t.Fatalf("subscribed until %s, want about two days", until)
	}
	// Kept: asking again makes no other.
	if _, err := n.a.Subscribe(ctx); err != nil || n.only(t).ID != s.ID {
		t.Fatalf("a second Subscribe: %v", err)
	}
	n.g.AddFile("/Clients/Acme/Engagement letter.pdf", 10, "application/pdf", time.Now())
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the sync woken", func() bool { return n.woken.Load() == 1 })

	for name, state := range map[string]string{"forged": strings.Repeat("0", 64), "none": ""} {
		body := `{"value":[{"subscriptionId":"` + s.ID + `","clientState":"` + state + `","changeType":"updated","resource":"` + s.Resource + `"}]}`
		resp, err := http.Post(n.server.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s clientState: %d, want 401", name, resp.StatusCode)
		}
	}
	if got := n.woken.Load(); got != 1 {
		t.Fatalf("unverified notifications woke the sync: %d wakes", got)
	}
}

// A subscription is renewed before it lapses (PATCH, the same one), made
// again when Graph dropped it without a word (found by the hourly check)
// and at once when Graph asks for reauthorization.
func TestSubscriptionIsRenewedAndMadeAgainWhenLost(t *testing.T) {
	n := newNotified(t)
	ctx := context.Background()
	if _, err := n.a.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	first := n.only(t)

	n.clock.Advance(25 * time.Hour)
	until, err := n.a.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	renewed := n.only(t)
	if renewed.ID != first.ID || !renewed.Expires.After(first.Expires) || time.Until(until) < 60*time.Hour {
		t.Fatalf("renewed %+v from %+v, until %s", renewed, first, until)
	}

	n.g.DropSubscription(renewed.ID)
	n.clock.Advance(time.Hour)
	if _, err := n.a.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	again := n.only(t)
	if again.ID == renewed.ID {
		t.Fatal("a subscription Graph dropped was not made again")
	}

	n.g.RequireReauthorization(again.ID)
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the lifecycle notification taken", func() bool { return n.woken.Load() >= 1 })
	if _, err := n.a.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if last := n.only(t); last.ID == again.ID || last.Reauthorize {
		t.Fatalf("after reauthorizationRequired: %+v", last)
	}
}

// Graph makes no subscription whose address does not answer its
// validation request: Subscribe fails, and nothing is kept live.
func TestSubscriptionNeedsTheValidationAnswered(t *testing.T) {
	g := vendortest.NewGraph()
	t.Cleanup(g.Close)
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	t.Cleanup(silent.Close)
	a, err := sharepoint.New(sharepoint.Config{Firm: "frm_acme", DriveID: g.DriveID, BaseURL: g.URL,
		OAuth2: upstream.OAuth2Config{AccessToken: g.Token}, NotificationURL: silent.URL,
		Upstream: upstream.Policy{RateLimit: -1, MaxAttempts: 1}}, upstream.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Subscribe(context.Background()); err == nil {
		t.Fatal("subscribed at an address that does not answer the validation")
	}
	if subs := g.Subscriptions(); len(subs) != 0 {
		t.Fatalf("subscriptions %+v", subs)
	}
}
