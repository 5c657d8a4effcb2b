package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
)

// A dispatcher that dies holding a lease loses nothing: once the lease
// expires another engine on the same database delivers.
func TestCrashedDispatchersLeaseExpires(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, nil)
		ep, _ := h.endpoint(live, rc.URL())
		// The harness engine stands for the dispatcher that is about to die:
		// stop its loop, queue a delivery, and claim it as it would have.
		h.eng.Close()
		h.ingest(clientChange(live))
		now := h.clock.Now()
		claims, _, err := h.store.Claim(h.ctx, dispatcher.ClaimRequest{
			Now: now, LeaseUntil: now.Add(time.Minute), Max: 10, PerEndpoint: 10,
		})
		if err != nil || len(claims) != 1 {
			t.Fatalf("Claim = %v, %v", claims, err)
		}
		dead := claims[0].Lease

		// The survivor sends one request at a time to the endpoint, in the
		// order deliveries fell due. A marker delivery, due after the leased
		// one, proves a claim has passed the leased one over: had the lease
		// not held, the leased one's request would have gone first.
		survivor, _ := h.engine(dispatcher.Config{MaxInFlightPerEndpoint: 1})
		h.run(survivor)
		h.clock.Advance(time.Second)
		marker := clientChange(live)
		if err := survivor.Ingest(h.ctx, marker); err != nil {
			t.Fatal(err)
		}
		var markerID string
		for _, d := range h.deliveries(ep.ID) {
			if d.ID != claims[0].Delivery.ID {
				markerID = d.ID
			}
		}
		h.waitAttempts(markerID, 1)
		if rc.count() != 1 || rc.requests()[0].header.Get("webhook-id") != h.delivery(markerID).EventID {
			t.Fatal("a leased delivery was attempted before its lease expired")
		}
		h.clock.Set(dead.Until)
		survivor.Kick()
		d := h.waitAttempts(claims[0].Delivery.ID, 1)
		if d.State != dispatcher.StateDelivered || rc.count() != 2 {
			t.Fatalf("after the lease expired: %s, %d requests", d.State, rc.count())
		}
		h.settled(d.ID, markerID)
		// The dead dispatcher, were it to wake, cannot record over it.
		_, err = h.store.RecordAttempt(h.ctx, dead, dispatcher.Outcome{State: dispatcher.StateFailed, At: h.clock.Now()})
		if !errors.Is(err, practice.ErrLeaseLost) {
			t.Fatalf("late record with a stale lease: %v", err)
		}
	})
}

// On shutdown an attempt still in flight after the grace period is
// aborted and handed back unrecorded, due at once for the next dispatcher.
func TestShutdownHandsInFlightAttemptsBack(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{ShutdownGrace: 50 * time.Millisecond})
		var hang atomic.Bool
		hang.Store(true)
		rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			if hang.Load() {
				<-r.Context().Done()
			}
		})
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		eventually.True(t, waitWithin, waitTick, "the attempt in flight", func() bool { return rc.count() == 1 })
		h.eng.Close()

		d := h.only(ep.ID)
		if d.State != dispatcher.StatePending || len(d.Attempts) != 0 {
			t.Fatalf("after shutdown: %s with %d attempts", d.State, len(d.Attempts))
		}
		hang.Store(false)
		next, _ := h.engine(dispatcher.Config{})
		h.run(next)
		d = h.waitAttempts(d.ID, 1)
		if d.State != dispatcher.StateDelivered {
			t.Fatalf("the next dispatcher left it %s", d.State)
		}
	})
}

// memOutbox is an in-memory outbox, as the embedded store presents it.
type memOutbox struct {
	mu      sync.Mutex
	entries []practice.OutboxEntry
	seq     uint64
	signal  chan struct{}
}

func newOutbox() *memOutbox { return &memOutbox{signal: make(chan struct{}, 1)} }

func (o *memOutbox) add(c practice.Change) {
	o.mu.Lock()
	o.seq++
	o.entries = append(o.entries, practice.OutboxEntry{Seq: o.seq, Change: c})
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

func (o *memOutbox) ReadOutbox(after uint64, max int) ([]practice.OutboxEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []practice.OutboxEntry
	for _, e := range o.entries {
		if e.Seq > after && len(out) < max {
			out = append(out, e)
		}
	}
	return out, nil
}

func (o *memOutbox) DeleteOutbox(upTo uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := o.entries[:0]
	for _, e := range o.entries {
		if e.Seq > upTo {
			kept = append(kept, e)
		}
	}
	o.entries = kept
	return nil
}

func (o *memOutbox) OutboxSignal() <-chan struct{} { return o.signal }

func (o *memOutbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.entries)
}

// flakyLog fails Record while failing is set, standing in for a store
// that is briefly unwritable.
type flakyLog struct {
	dispatcher.EventLog
	failing atomic.Bool
	calls   atomic.Int32
}

func (f *flakyLog) Record(ctx context.Context, evs []dispatcher.Event) ([]bool, error) {
	f.calls.Add(1)
	if f.failing.Load() {
		return nil, errors.New("disk full")
	}
	return f.EventLog.Record(ctx, evs)
}

func TestOutboxDrainDeletesOnlyAfterIngest(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		rc := newReceiver(t, nil)
		ep, _ := h.endpoint(live, rc.URL())

		flaky := &flakyLog{EventLog: h.store.Backends().Events}
		flaky.failing.Store(true)
		b := h.store.Backends()
		b.Events = flaky
		eng, err := dispatcher.New(dispatcher.Config{Clock: h.clock.Now, AllowCIDRs: loopbackOnly()}, b)
		if err != nil {
			t.Fatal(err)
		}
		h.run(eng)
		ob := newOutbox()
		ctx, cancel := context.WithCancel(context.Background())
		drained := make(chan error, 1)
		go func() { drained <- eng.DrainOutbox(ctx, ob) }()
		defer func() {
			cancel()
			if err := <-drained; err != nil {
				t.Errorf("DrainOutbox: %v", err)
			}
		}()

		first := clientChange(live)
		unreadable := practice.Change{ID: "chg_bad", Firm: live.Firm, Kind: practice.Clients, After: json.RawMessage(`{"id":`)}
		second := clientChange(live)
		ob.add(first)
		ob.add(unreadable)
		ob.add(second)

		eventually.True(t, waitWithin, waitTick, "an ingest attempt", func() bool { return flaky.calls.Load() >= 2 })
		if ob.len() != 3 {
			t.Fatalf("%d entries left while ingesting fails, want all 3", ob.len())
		}
		flaky.failing.Store(false)
		eventually.True(t, waitWithin, waitTick, "the outbox drained", func() bool { return ob.len() == 0 })
		eventually.True(t, waitWithin, waitTick, "two deliveries", func() bool { return rc.count() == 2 })

		// A crash before the delete would read the same changes again: nothing
		// is recorded or delivered twice.
		ob.add(first)
		ob.add(second)
		eventually.True(t, waitWithin, waitTick, "the re-read drained", func() bool { return ob.len() == 0 })
		page, err := eng.ListEvents(h.ctx, dispatcher.EventQuery{Tenant: live})
		if err != nil || len(page.Events) != 2 {
			t.Fatalf("ListEvents = %d events, %v; want 2", len(page.Events), err)
		}
		ds := h.deliveries(ep.ID)
		if len(ds) != 2 {
			t.Fatalf("%d deliveries, want 2", len(ds))
		}
		for _, d := range ds {
			h.waitAttempts(d.ID, 1)
			h.settled(d.ID)
		}
		if rc.count() != 2 {
			t.Fatalf("%d requests, want 2", rc.count())
		}
	})
}

func TestIngestIsIdempotentAndTenantScoped(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		liveRC := newReceiver(t, nil)
		sandboxRC := newReceiver(t, nil)
		otherRC := newReceiver(t, nil)
		liveEP, _ := h.endpoint(live, liveRC.URL())
		sandboxEP, _ := h.endpoint(sandbox, sandboxRC.URL())
		h.endpoint(practice.Tenant{Firm: "frm_birch"}, otherRC.URL())
		jobsOnly, _ := h.endpoint(live, liveRC.URL(), dispatcher.JobOpened)

		c := clientChange(sandbox)
		h.ingest(c)
		h.ingest(c)
		eventually.True(t, waitWithin, waitTick, "the sandbox delivery", func() bool { return sandboxRC.count() == 1 })
		// The one delivery is final and nothing else was queued for anyone.
		h.settled(h.waitAttempts(h.only(sandboxEP.ID).ID, 1).ID)
		if sandboxRC.count() != 1 || liveRC.count() != 0 || otherRC.count() != 0 {
			t.Fatalf("requests: sandbox %d, live %d, other firm %d", sandboxRC.count(), liveRC.count(), otherRC.count())
		}
		if env := decode(t, sandboxRC.requests()[0].body); !env.Sandbox {
			t.Error(`a sandbox event without "sandbox": true`)
		}
		if len(h.deliveries(sandboxEP.ID)) != 1 || len(h.deliveries(liveEP.ID)) != 0 || len(h.deliveries(jobsOnly.ID)) != 0 {
			t.Fatal("deliveries went to the wrong endpoints")
		}
		page, _ := h.eng.ListEvents(h.ctx, dispatcher.EventQuery{Tenant: sandbox})
		if len(page.Events) != 1 {
			t.Fatalf("%d sandbox events, want 1", len(page.Events))
		}
		if _, err := h.eng.GetEvent(h.ctx, live, page.Events[0].ID); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("a sandbox event read as live: %v", err)
		}
		// Recorded whether or not anyone listens.
		h.ingest(clientChange(practice.Tenant{Firm: "frm_nobody"}))
		page, _ = h.eng.ListEvents(h.ctx, dispatcher.EventQuery{Tenant: practice.Tenant{Firm: "frm_nobody"}})
		if len(page.Events) != 1 {
			t.Errorf("an unheard event was not recorded")
		}
	})
}

func TestIngestRefusesOversizedEvents(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{})
		c := clientChange(live)
		c.After = json.RawMessage(`{"id":"cli_big","notes":"` + strings.Repeat("x", dispatcher.MaxPayload) + `"}`)
		err := h.eng.Ingest(h.ctx, c)
		if !errors.Is(err, dispatcher.ErrInvalidChange) {
			t.Fatalf("Ingest = %v, want ErrInvalidChange", err)
		}
		page, _ := h.eng.ListEvents(h.ctx, dispatcher.EventQuery{Tenant: live})
		if len(page.Events) != 0 {
			t.Fatal("an oversized event was recorded")
		}
	})
}
