package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
)

// A change published to the changes topic reaches a receiver as a signed
// webhook, and its event reaches the events topic keyed by resource id. A
// record that can never become an event is skipped, not stuck on.
func TestChangeToWebhook(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	rc.register(e)
	e.dispatcher(e.config())

	var ids []string
	var changes []practice.Change
	for i := range 20 {
		c := change("Smith & Daughters <" + string(rune('a'+i)) + ">")
		changes = append(changes, c)
		ids = append(ids, eventID(c))
	}
	e.publish(changes[:10]...)
	// A poison record between good ones: not JSON at all.
	w := &kafkago.Writer{Addr: kafkago.TCP(e.brokers...), Topic: topics.Changes, RequiredAcks: kafkago.RequireAll}
	if err := w.WriteMessages(context.Background(), kafkago.Message{Key: []byte("x"), Value: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	e.publish(changes[10:]...)

	rc.waitAll(ids, 20*time.Second)
	rc.mu.Lock()
	body := rc.bodies[ids[0]]
	rc.mu.Unlock()
	if !strings.Contains(string(body), `"name":"Smith & Daughters <a>"`) {
		t.Errorf("the record did not arrive byte for byte: %s", body)
	}

	// The events topic has every event, keyed by its resource, with the
	// same id the webhook carried.
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: e.brokers, Topic: topics.Events, GroupID: "test-reader",
		StartOffset: kafkago.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	byID := map[string]practice.Change{}
	for _, c := range changes {
		byID[eventID(c)] = c
	}
	for len(seen) < len(ids) {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read events topic after %d: %v", len(seen), err)
		}
		var ev dispatcher.Event
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		c, ok := byID[ev.ID]
		if !ok {
			t.Fatalf("unexpected event %s", ev.ID)
		}
		if string(m.Key) != c.ResourceID || ev.Event != dispatcher.ClientCreated {
			t.Errorf("event %s keyed %q, want %q", ev.ID, m.Key, c.ResourceID)
		}
		seen[ev.ID] = true
	}
	// Recorded in the shared store, listable through the API's engine.
	page, err := e.gateway.ListEvents(context.Background(), dispatcher.EventQuery{Tenant: live, Limit: 50})
	if err != nil || len(page.Events) != len(ids) {
		t.Fatalf("ListEvents = %d events, %v", len(page.Events), err)
	}
}

// A dispatcher given an address serves its probes there while it runs:
// alive, ready once it has joined its consumer group, and its metrics.
// Once it has stopped nothing listens there any more; an address it
// cannot listen on fails it at start.
func TestProbesServeWhileTheDispatcherRuns(t *testing.T) {
	e := newEnv(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	cfg := e.config()
	cfg.Listen = addr
	// Bounded, so that a dispatcher that starts anyway fails the test
	// instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := kafka.Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "listening on "+addr) {
		t.Fatalf("Run on a taken address: %v", err)
	}
	taken.Close()

	cfg = e.config()
	cfg.Listen = addr
	stop := e.dispatcher(cfg)
	get := func(path string) (int, string) {
		res, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for code, body := get("/readyz"); code != http.StatusOK || body != "ready\n"; code, body = get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "# TYPE ") {
		t.Errorf("/metrics = %d %.200q", code, body)
	}
	stop()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the probe address still answers after the dispatcher stopped")
	}
}

// Two dispatchers in one group share the partitions and the deliveries:
// every event arrives, each exactly once, and both take part. The second
// joins mid-stream, so partitions change hands while changes flow: each
// goes with its batch finished and committed, and no change is handled
// twice.
func TestTwoDispatchersShareTheWork(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	ep := rc.register(e)
	one, two := e.config(), e.config()
	e.dispatcher(one)
	e.waitMembers(kafka.DefaultGroup, 1)

	var ids []string
	publish := func(k int) {
		var batch []practice.Change
		for range k {
			c := change("c")
			ids = append(ids, eventID(c))
			batch = append(batch, c)
		}
		e.publish(batch...)
	}
	for i := range 40 {
		publish(20)
		time.Sleep(25 * time.Millisecond)
		if i == 10 {
			e.dispatcher(two)
		}
	}
	e.waitMembers(kafka.DefaultGroup, 2)
	for range 10 {
		publish(20)
		time.Sleep(10 * time.Millisecond)
	}
	rc.waitAll(ids, 30*time.Second)
	e.settled(rc, ep.ID, 30*time.Second)
	for id, got := range rc.counts() {
		if got != 1 {
			t.Errorf("event %s delivered %d times", id, got)
		}
	}
	consumed := 0.0
	for name, cfg := range map[string]struct{ consumed, delivered float64 }{
		"one": {counter(t, one.Registerer, "practicegw_changes_consumed_total"), counter(t, one.Registerer, "practicegw_deliveries_total")},
		"two": {counter(t, two.Registerer, "practicegw_changes_consumed_total"), counter(t, two.Registerer, "practicegw_deliveries_total")},
	} {
		t.Logf("dispatcher %s consumed %.0f changes and delivered %.0f", name, cfg.consumed, cfg.delivered)
		if cfg.consumed == 0 || cfg.delivered == 0 {
			t.Errorf("dispatcher %s took no part", name)
		}
		consumed += cfg.consumed
	}
	if int(consumed) != len(ids) {
		t.Errorf("%.0f changes consumed in all, want %d: a partition changed hands without its commit", consumed, len(ids))
	}
}

// A dispatcher killed with SIGKILL mid-stream loses nothing: another
// resumes from its last commit, and every event arrives, duplicates only
// ever with the same id.
func TestKilledDispatcherLosesNothing(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	rc.register(e)
	kill := e.child()

	const n = 1500
	var ids []string
	published := make(chan struct{})
	var mid atomic.Bool
	go func() {
		defer close(published)
		for i := 0; i < n; i += 25 {
			var batch []practice.Change
			for range 25 {
				c := change("k")
				batch = append(batch, c)
				ids = append(ids, eventID(c))
			}
			if err := e.pub.PublishBatch(context.Background(), batch); err != nil {
				t.Error(err)
				return
			}
			if i >= n/3 {
				mid.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	// Kill it once it is well into the stream, delivering.
	eventually.NoError(t, 30*time.Second, 5*time.Millisecond, "the child well into the stream", func() error {
		if n := len(rc.counts()); !mid.Load() || n < 100 {
			return fmt.Errorf("the child delivered %d", n)
		}
		return nil
	})
	kill()
	before := len(rc.counts())
	<-published
	t.Logf("killed after %d deliveries; resuming", before)

	e.dispatcher(e.config())
	rc.waitAll(ids, 40*time.Second)
	dups := 0
	for _, got := range rc.counts() {
		dups += got - 1
	}
	t.Logf("%d events, %d duplicate requests (same ids)", len(ids), dups)
	if len(rc.counts()) != len(ids) {
		t.Fatalf("%d distinct events arrived, want %d", len(rc.counts()), len(ids))
	}
}

// A dead endpoint (it never answers) beside a healthy one holds only its
// own slots: the healthy one's latency stays low.
func TestDeadEndpointBesideHealthy(t *testing.T) {
	e := newEnv(t)
	dead := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	dead.register(e)
	healthy := newReceiver(t, nil)
	healthy.register(e)
	e.dispatcher(e.config())

	const n, rate = 1000, 400 // per second
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var ids []string
	tick := time.NewTicker(time.Second / (rate / 10))
	defer tick.Stop()
	for i := 0; i < n; i += 10 {
		<-tick.C
		var batch []practice.Change
		now := time.Now()
		for range 10 {
			c := change("h")
			batch = append(batch, c)
			id := eventID(c)
			ids = append(ids, id)
			mu.Lock()
			sent[id] = now
			mu.Unlock()
		}
		e.publish(batch...)
	}
	healthy.waitAll(ids, 20*time.Second)
	var lat []time.Duration
	healthy.mu.Lock()
	for _, id := range ids {
		lat = append(lat, healthy.at[id].Sub(sent[id]))
	}
	healthy.mu.Unlock()
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	t.Logf("healthy endpoint beside a dead one: p50 %s, p99 %s over %d events", p50, p99, n)
	if p99 > time.Second {
		t.Errorf("healthy p99 %s, want under 1s", p99)
	}
}

// Redis restarting mid-stream loses nothing: the consumer retries its
// batch and commits only once it is recorded, the delivery loop picks up
// where the queue is.
func TestRedisRestartMidStream(t *testing.T) {
	e := newEnv(t, redistestAOF())
	rc := newReceiver(t, nil)
	rc.register(e)
	e.dispatcher(e.config())

	var ids []string
	publish := func(k int) {
		var batch []practice.Change
		for range k {
			c := change("r")
			batch = append(batch, c)
			ids = append(ids, eventID(c))
		}
		e.publish(batch...)
	}
	for range 10 {
		publish(20)
		time.Sleep(10 * time.Millisecond)
	}
	e.redis.Stop()
	// Changes keep coming while Redis is away.
	for range 5 {
		publish(20)
		time.Sleep(100 * time.Millisecond)
	}
	e.redis.Restart()
	for range 5 {
		publish(20)
		time.Sleep(10 * time.Millisecond)
	}
	rc.waitAll(ids, 30*time.Second)
}
