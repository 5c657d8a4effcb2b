package connect_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

func (h *harness) secretOf(id, name string) string {
	h.t.Helper()
	b, err := h.state.Last(ctx, connect.SecretKey(id, name))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func (h *harness) subscriptions() map[string]map[string]any {
	h.v.mu.Lock()
	defer h.v.mu.Unlock()
	out := map[string]map[string]any{}
	for k, v := range h.v.subs {
		out[k] = v
	}
	return out
}

// A refused access key is the caller's parameter error, never quoted, and
// leaves nothing stored; an accepted one is kept sealed, and the Work,
// Contact and User subscriptions are made with one signing key the
// gateway generated, as Karbon's description defines them.
func TestKarbonKeyRefusedThenAccepted(t *testing.T) {
	h := newHarness(t)
	_, err := h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: "kb-wrong-key-0b9d"})
	h.secret("kb-wrong-key-0b9d")
	h.wantAPIError(err, 400, "parameter_invalid", "access_key")
	if cs, _ := h.store.Connections(ctx, ""); len(cs) != 0 {
		t.Fatalf("a refused key left %v", cs)
	}

	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	if v.Status != connection.Connected || v.AuthorizeURL != "" || v.ConnectedAt == nil {
		t.Fatalf("karbon: %+v", v)
	}
	if got := h.secretOf(v.ID, "access_key"); got != h.v.karbonKey {
		t.Fatalf("access key kept as %q", got)
	}
	signing := h.secretOf(v.ID, "webhook_key")
	h.secret(signing)
	if len(signing) != 43 || !signingKeyPattern.MatchString(signing) {
		t.Fatalf("signing key %q: want 32 random bytes, base64url", signing)
	}
	subs := h.subscriptions()
	target := "https://gw.example.com/connect/webhooks/karbon/" + v.ID
	for _, typ := range []string{"Work", "Contact", "User"} {
		s := subs[typ]
		if s["TargetUrl"] != target || s["SigningKey"] != signing || s["WebhookType"] != typ {
			t.Errorf("%s subscription %v", typ, s)
		}
	}
	if len(subs) != 3 {
		t.Fatalf("subscriptions %v", subs)
	}

	// A new key on reconnect is checked, kept, and keeps the signing key.
	h.v.mu.Lock()
	h.v.karbonKey = "kb-rotated-key-5e6a"
	h.v.mu.Unlock()
	_, err = h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true, AccessKey: "kb-access-key-7c1f"})
	h.wantAPIError(err, 400, "parameter_invalid", "access_key")
	again := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true, AccessKey: "kb-rotated-key-5e6a"}))
	if again.Status != connection.Connected || h.secretOf(v.ID, "access_key") != "kb-rotated-key-5e6a" ||
		h.secretOf(v.ID, "webhook_key") != signing {
		t.Fatalf("reconnect: %+v", again.Connection)
	}
}

// stepClock is a clock whose Sleep waits for the test: it reports each
// sleep, then returns when the test moves it on (or ctx ends).
type stepClock struct {
	mu    sync.Mutex
	now   time.Time
	slept chan time.Duration
	wake  chan struct{}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case c.slept <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.wake:
		c.mu.Lock()
		c.now = c.now.Add(d)
		c.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Every few minutes (SubscriptionCheck, at most five) the subscriptions
// Karbon ended, or moved elsewhere, or forgot all at once (a Karbon that
// restarted), are made again with the connection's signing key, and it is
// logged; a key Karbon refuses turns the connection needs_reconnect.
func TestRunRecreatesCancelledSubscriptions(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	signing := h.secretOf(v.ID, "webhook_key")
	h.secret(signing)

	clock := &stepClock{now: h.clock.Now(), slept: make(chan time.Duration), wake: make(chan struct{})}
	m := connect.New(h.cfg, connect.Deps{Connections: h.store, Authorizations: h.store, Firms: firms{}, Runtime: h.rt,
		Upstream: depsWithClock(h, clock)})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitSleep := func() {
		t.Helper()
		select {
		case d := <-clock.slept:
			if d != connect.SubscriptionCheck || d > 5*time.Minute {
				t.Fatalf("Run sleeps %v between checks: a lost subscription must be found within minutes", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not finish its round")
		}
	}
	waitSleep() // the first round found everything in place
	h.v.mu.Lock()
	h.v.subCalls = nil
	delete(h.v.subs, "Work")
	h.v.subs["Contact"]["TargetUrl"] = "https://old.example.com/hook"
	h.v.mu.Unlock()
	clock.wake <- struct{}{}
	waitSleep()

	subs := h.subscriptions()
	target := "https://gw.example.com/connect/webhooks/karbon/" + v.ID
	for _, typ := range []string{"Work", "Contact", "User"} {
		if s := subs[typ]; s["TargetUrl"] != target || s["SigningKey"] != signing && typ != "User" {
			t.Errorf("%s after the check: %v", typ, s)
		}
	}
	h.v.mu.Lock()
	calls := slices.Clone(h.v.subCalls)
	h.v.mu.Unlock()
	want := []string{"GET /v3/WebhookSubscriptions/Work", "POST /v3/WebhookSubscriptions",
		"GET /v3/WebhookSubscriptions/Contact", "DELETE /v3/WebhookSubscriptions/Contact", "POST /v3/WebhookSubscriptions",
		"GET /v3/WebhookSubscriptions/User"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %q\nwant %q", calls, want)
	}
	if n := countLogged(h, "webhook subscription made again"); n != 2 {
		t.Fatalf("%d subscriptions logged as made again; want 2", n)
	}

	// Karbon restarts and forgets every subscription: the next check,
	// one interval on, makes all three again.
	h.v.mu.Lock()
	for typ := range h.v.subs {
		delete(h.v.subs, typ)
	}
	h.v.mu.Unlock()
	clock.wake <- struct{}{}
	waitSleep()
	subs = h.subscriptions()
	for _, typ := range []string{"Work", "Contact", "User"} {
		if s := subs[typ]; s["TargetUrl"] != target || s["SigningKey"] != signing {
			t.Errorf("%s one check after Karbon forgot it: %v", typ, s)
		}
	}
	if n := countLogged(h, "webhook subscription made again"); n != 5 {
		t.Fatalf("%d subscriptions logged as made again; want 5", n)
	}

	// The firm revokes the key in Karbon.
	h.v.mu.Lock()
	h.v.karbonKey = "kb-another-key-1111"
	h.v.mu.Unlock()
	clock.wake <- struct{}{}
	waitSleep()
	if c := h.stored(v.ID); c.Status != connection.NeedsReconnect || !strings.Contains(c.Reason, "Karbon no longer accepts this connection's access key") {
		t.Fatalf("after Karbon refused the key: %+v", c)
	}
}

func countLogged(h *harness, prefix string) int {
	n := 0
	for _, msg := range h.logged() {
		if strings.HasPrefix(msg, prefix) {
			n++
		}
	}
	return n
}

// One instance at a time checks: another's lease leaves the round to it.
func TestCheckSubscriptionsUnderALease(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	h.v.mu.Lock()
	delete(h.v.subs, "User")
	h.v.mu.Unlock()
	if ok, _ := h.locks.Lease(ctx, "connect/webhook-subscriptions", "another-instance", time.Hour); !ok {
		t.Fatal("lease")
	}
	if err := h.m.CheckSubscriptions(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.subscriptions()["User"]; ok {
		t.Fatal("checked while another instance held the lease")
	}
	h.clock.Advance(time.Hour)
	if err := h.m.CheckSubscriptions(ctx); err != nil {
		t.Fatal(err)
	}
	if s := h.subscriptions()["User"]; s["TargetUrl"] != "https://gw.example.com/connect/webhooks/karbon/"+v.ID {
		t.Fatalf("User after the lease expired: %v", s)
	}
}

// Disconnecting Karbon deletes every subscription the gateway made and
// blanks the access and signing keys.
func TestDisconnectKarbonRemovesSubscriptions(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	h.secret(h.secretOf(v.ID, "webhook_key"))
	gone := h.check(h.m.Disconnect(ctx, "frm_a", v.ID))
	if gone.Status != connection.Disconnected || gone.Reason != "disconnected by the gateway's operator with practicegw connect disconnect" {
		t.Fatalf("%+v", gone.Connection)
	}
	if subs := h.subscriptions(); len(subs) != 0 {
		t.Fatalf("subscriptions left: %v", subs)
	}
	if h.secretOf(v.ID, "access_key") != "" || h.secretOf(v.ID, "webhook_key") != "" {
		t.Fatal("secrets outlived the disconnect")
	}
	if p := h.rt.purges(); len(p) != 1 {
		t.Fatalf("purges %v", p)
	}
}

// Karbon answering what the gateway cannot use while the subscriptions
// are made: the connection stays pending with a reason, the answer is a
// 502, and a reconnect finishes it.
func TestKarbonSubscriptionsFailingLeaveThePendingConnection(t *testing.T) {
	h := newHarness(t)
	h.v.garbage["/v3/WebhookSubscriptions/Work"] = true
	_, err := h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey})
	h.wantAPIError(err, 502, "upstream_unavailable", "")
	cs, _ := h.store.Connections(ctx, "frm_a")
	if len(cs) != 1 || cs[0].Status != connection.Pending || !strings.Contains(cs[0].Reason, "webhook subscriptions could not be made") {
		t.Fatalf("after the failure: %+v", cs)
	}
	h.secret(h.secretOf(cs[0].ID, "webhook_key"))
	delete(h.v.garbage, "/v3/WebhookSubscriptions/Work")
	v := h.check(h.m.Update(ctx, "frm_a", cs[0].ID, connection.Request{Reconnect: true, AccessKey: h.v.karbonKey}))
	if v.Status != connection.Connected || len(h.subscriptions()) != 3 {
		t.Fatalf("reconnected: %+v, %v", v.Connection, h.subscriptions())
	}
}

// Karbon refusing the key while the subscriptions are made, a moment
// after it took it (the key revoked meanwhile, or a glitch), is answered
// as a refused key, in the contract, on a connect and on a reconnect.
func TestKarbonRefusingTheKeyWhileSubscribing(t *testing.T) {
	h := newHarness(t)
	h.v.refused["/v3/WebhookSubscriptions/Work"] = true
	_, err := h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey})
	h.wantAPIError(err, 400, "parameter_invalid", "access_key")
	cs, _ := h.store.Connections(ctx, "frm_a")
	if len(cs) != 1 || cs[0].Status != connection.Pending || !strings.Contains(cs[0].Reason, "refused the access key") {
		t.Fatalf("after the refusal: %+v", cs)
	}
	// A refusal changes nothing: the refused key is not kept.
	if k := h.secretOf(cs[0].ID, "access_key"); k != "" {
		t.Fatalf("the refused key was kept")
	}
	h.secret(h.secretOf(cs[0].ID, "webhook_key"))
	delete(h.v.refused, "/v3/WebhookSubscriptions/Work")
	v := h.check(h.m.Update(ctx, "frm_a", cs[0].ID, connection.Request{Reconnect: true, AccessKey: h.v.karbonKey}))
	if v.Status != connection.Connected {
		t.Fatalf("reconnected: %+v", v.Connection)
	}
	h.v.refused["/v3/WebhookSubscriptions/Contact"] = true
	_, err = h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true, AccessKey: h.v.karbonKey})
	h.wantAPIError(err, 400, "parameter_invalid", "access_key")
	// Nor does a refused reconnect: no new attempt, so no instance reopens
	// Karbon, and the connection stays connected on the key it had.
	after, _ := h.store.Connections(ctx, "frm_a")
	if len(after) != 1 || after[0].Attempt != v.Attempt || after[0].Status != connection.Connected {
		t.Fatalf("after a refused reconnect: %+v, before %+v", after, v.Connection)
	}
}

// Karbon's billing connected as the ledger on the records' access key:
// its connection subscribes to Invoice alone, each connection's webhooks
// reach its own route, and disconnecting the ledger leaves the records'
// subscriptions.
func TestKarbonLedgerBesideKarbonRecords(t *testing.T) {
	h := newHarness(t)
	records := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	h.secret(h.secretOf(records.ID, "webhook_key"))
	ledger := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "karbon", AccessKey: h.v.karbonKey}))
	h.secret(h.secretOf(ledger.ID, "webhook_key"))
	if ledger.Status != connection.Connected || ledger.Role != "ledger" || ledger.System != "karbon" {
		t.Fatalf("ledger: %+v", ledger.Connection)
	}
	subs := h.subscriptions()
	for typ, id := range map[string]string{"Work": records.ID, "Contact": records.ID, "User": records.ID, "Invoice": ledger.ID} {
		if s := subs[typ]; s["TargetUrl"] != "https://gw.example.com/connect/webhooks/karbon/"+id {
			t.Errorf("%s subscription %v, want it to reach %s", typ, s, id)
		}
	}
	if len(subs) != 4 {
		t.Fatalf("subscriptions %v", subs)
	}
	h.check(h.m.Disconnect(ctx, "frm_a", ledger.ID))
	if subs := h.subscriptions(); len(subs) != 3 || subs["Invoice"] != nil || subs["Work"] == nil {
		t.Fatalf("after the ledger's disconnect: %v", subs)
	}
}

// A Karbon that restarted has forgotten every subscription of a
// connection and tells no one: the next check, one SubscriptionCheck on
// (minutes, on an injected clock), makes each again at the Karbon double,
// to the connection's address and with its signing key, as Karbon's
// description defines the calls.
func TestSubscriptionsKarbonForgotAreMadeAgainWithinOneCheck(t *testing.T) {
	h := newHarness(t)
	k := vendortest.StartKarbon(t)
	cfg := &connect.Config{PublicURL: "https://gw.example.com/", Apps: []connect.AppConfig{
		appConfig(t, "karbon", map[string]string{"bearer": k.Bearer, "base_url": k.URL})}}
	provision(t, cfg)
	clock := &stepClock{now: h.clock.Now(), slept: make(chan time.Duration), wake: make(chan struct{})}
	m := connect.New(cfg, connect.Deps{Connections: h.store, Authorizations: h.store, Firms: firms{}, Runtime: h.rt,
		Upstream: depsWithClock(h, clock)})
	v := h.check(m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: k.AccessKey}))
	if v.Status != connection.Connected {
		t.Fatalf("karbon: %+v", v)
	}
	target := "https://gw.example.com/connect/webhooks/karbon/" + v.ID
	signing := h.secretOf(v.ID, "webhook_key")
	subscribed := func() map[string]vendortest.KarbonSubscription {
		out := map[string]vendortest.KarbonSubscription{}
		for _, s := range k.Subscriptions() {
			out[s.WebhookType] = s
		}
		return out
	}
	if got := subscribed(); len(got) != 3 {
		t.Fatalf("subscriptions once connected: %+v", got)
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitSleep := func() {
		t.Helper()
		select {
		case d := <-clock.slept:
			if d != connect.SubscriptionCheck || d > 5*time.Minute {
				t.Fatalf("Run sleeps %v between checks: a lost subscription must be found within minutes", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not finish its round")
		}
	}
	waitSleep()
	for _, typ := range []string{"Work", "Contact", "User"} {
		k.CancelSubscription(typ)
	}
	if got := subscribed(); len(got) != 0 {
		t.Fatalf("subscriptions after Karbon forgot them: %+v", got)
	}
	clock.wake <- struct{}{}
	waitSleep()
	got := subscribed()
	for _, typ := range []string{"Work", "Contact", "User"} {
		if s, ok := got[typ]; !ok || s.TargetUrl != target || s.SigningKey != signing || s.AccessKey != k.AccessKey {
			t.Errorf("%s one check after Karbon forgot it: %+v (present %v)", typ, s, ok)
		}
	}
	if n := countLogged(h, "webhook subscription made again"); n != 3 {
		t.Errorf("%d subscriptions logged as made again; want 3", n)
	}
}
