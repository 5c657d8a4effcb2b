package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/testclock"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// slowLoad is a shared store whose whole-model load waits until released,
// as loading 130,000 jobs from Redis takes longer than a read may wait.
type slowLoad struct {
	*readmodelsim.Store
	release chan struct{}
}

func (s *slowLoad) Load(ctx context.Context, firm string, fn func(readmodel.Update) error) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Load(ctx, firm, fn)
}

// An instance whose feed position was trimmed answers reads at once from
// its copy, says lagging while it reloads in the background, and is live
// with every record once it has.
func TestFollowerBehindTheFeedCatchesUpOffTheReadPath(t *testing.T) {
	ctx := context.Background()
	store := &slowLoad{Store: readmodelsim.NewStore(nil), release: make(chan struct{})}
	writer := readmodel.New(readmodel.Config{Firm: firm, Store: store, Updates: store})
	writer.Serve(practice.Jobs, nil)
	var catchUp []func(context.Context)
	follower := readmodel.New(readmodel.Config{Firm: firm, Store: store, Updates: store,
		Background: func(run func(context.Context)) { catchUp = append(catchUp, run) }})
	follower.Serve(practice.Jobs, nil)
	follower.SetFreshness(practice.Jobs, practice.Freshness{Backfilled: true, State: readmodel.StateLive, ConfirmedAt: epoch})

	var us []readmodel.Update
	for i := range 50 {
		id := fmt.Sprintf("job_%03d", i)
		us = append(us, readmodel.Update{Kind: practice.Jobs, ID: id, Raw: job(id, "planned")})
	}
	if err := writer.Apply(ctx, us); err != nil {
		t.Fatal(err)
	}
	store.Trim(firm, 1)

	done := make(chan practice.Page, 1)
	go func() {
		p, _ := follower.List(ctx, live, practice.Jobs, practice.Query{Limit: 100})
		done <- p
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a read waited for the reload of the whole model")
	}
	if f, _ := follower.Freshness(practice.Jobs); f.State != readmodel.StateLagging || !f.ConfirmedAt.Equal(epoch) {
		t.Fatalf("freshness while behind the feed: %+v, want lagging, confirmed at %s", f, epoch)
	}
	if len(catchUp) != 1 {
		t.Fatalf("%d background catch-ups started, want 1", len(catchUp))
	}
	close(store.release)
	catchUp[0](ctx)
	if f, _ := follower.Freshness(practice.Jobs); f.State != readmodel.StateLive {
		t.Fatalf("freshness after catching up: %+v", f)
	}
	if got := follower.Count(practice.Jobs); got != 50 {
		t.Fatalf("%d jobs after catching up, want 50", got)
	}
}

// repeatingClients is a vendor whose clients listing gives the same next
// link for ever.
type repeatingClients struct{ *readmodelsim.Vendor }

func (r repeatingClients) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	p, err := r.Vendor.List(ctx, t, k, q)
	if k == practice.Clients && err == nil {
		p.HasMore, p.Next = true, "3"
		if q.Cursor == "3" {
			p.Next = q.Cursor
		}
	}
	return p, err
}

func simSyncer(clock *testclock.Clock, store *readmodelsim.Store, reader practice.Reader, holder string) (*readmodel.Syncer, *readmodel.Model) {
	m := readmodel.New(readmodel.Config{Firm: firm, Store: store, Updates: store})
	kinds := []practice.Kind{practice.Clients, practice.Jobs}
	for _, k := range kinds {
		m.Serve(k, reader)
	}
	return readmodel.NewSyncer(readmodel.SyncedSystem{Role: "records", Kinds: kinds, Reader: reader},
		readmodel.SyncDeps{Model: m, Recorder: &changes.Recorder{State: m, Clock: clock}, Sink: &sink{},
			Checkpoints: store, Leases: store, Holder: holder},
		readmodel.SyncConfig{Poll: time.Minute, Reconcile: time.Hour, LeaseTTL: 30 * time.Second},
		readmodel.WithClock(clock.Now)), m
}

// A kind whose backfill fails keeps failing alone: the other kind is
// backfilled, polled and live.
func TestAFailingKindFailsAlone(t *testing.T) {
	clock := testclock.New(epoch)
	vendor := readmodelsim.NewVendor(clock.Now, 3)
	for i := range 10 {
		vendor.Put(practice.Clients, fmt.Sprintf("cli_%03d", i), "Client")
		vendor.Put(practice.Jobs, fmt.Sprintf("job_%03d", i), "Job")
	}
	s, m := simSyncer(clock, readmodelsim.NewStore(clock.Now), repeatingClients{vendor}, "one")
	for range 40 {
		s.Tick(context.Background())
		clock.Advance(2 * time.Second)
	}
	if got := m.Count(practice.Jobs); got != 10 {
		t.Fatalf("%d jobs backfilled while clients fail, want 10", got)
	}
	jobs, _ := m.Freshness(practice.Jobs)
	clients, _ := m.Freshness(practice.Clients)
	if jobs.State != readmodel.StateLive || !jobs.Backfilled || clients.State != readmodel.StateFailing {
		t.Fatalf("jobs %+v, clients %+v; want jobs live and clients failing", jobs, clients)
	}
	// Callers are told why in the gateway's words, never the vendor's.
	if want := "the gateway's calls to the vendor fail; this copy may be stale"; clients.Reason != want || jobs.Reason != "" {
		t.Errorf("reasons: clients %q, jobs %q; want clients %q and jobs none", clients.Reason, jobs.Reason, want)
	}
}

// A step that ends after its lease expired and was taken saves nothing
// over the new holder's checkpoint.
func TestALateStepDoesNotSaveOverTheNewHolder(t *testing.T) {
	clock := testclock.New(epoch)
	store := readmodelsim.NewStore(clock.Now)
	vendor := readmodelsim.NewVendor(clock.Now, 3)
	for i := range 10 {
		vendor.Put(practice.Jobs, fmt.Sprintf("job_%03d", i), "Job")
	}
	a, _ := simSyncer(clock, store, vendor, "a")
	b, _ := simSyncer(clock, store, vendor, "b")
	ctx := context.Background()
	if held, _ := a.Tick(ctx); !held {
		t.Fatal("a did not take the free lease")
	}
	// a pauses in the middle of reading a page, longer than its lease;
	// b takes the sync over and saves its own progress.
	paused := false
	vendor.Between = func() {
		if paused {
			return
		}
		paused = true
		clock.Advance(time.Minute)
		vendor.Between = nil
		if held, _ := b.Tick(ctx); !held {
			t.Error("b did not take the expired lease")
		}
	}
	a.Tick(ctx)
	raw, err := store.Checkpoint(ctx, "sync/"+firm+"/records")
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Holder string }
	if err := json.Unmarshal(raw, &p); err != nil || p.Holder != "b" {
		t.Fatalf("checkpoint by %q (%v), want the new holder b's", p.Holder, err)
	}
}

// askedMidPass is a vendor at which, while a reconciliation lists its
// clients, the firm deletes a client the listing has already shown and
// then asks for a resync, as an administrator would after the deletion.
type askedMidPass struct {
	*readmodelsim.Vendor
	during func(shown []json.RawMessage)
}

func (a *askedMidPass) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	p, err := a.Vendor.List(ctx, t, k, q)
	if during := a.during; err == nil && during != nil && k == practice.Clients && q.Cursor == "" && q.Filter.UpdatedSince.IsZero() {
		a.during = nil
		during(p.Items)
	}
	return p, err
}

// A resync asked for while a reconciliation lists is answered by a
// reconciliation that starts after it, not by the one under way, which
// read some pages before what the resync was asked about: a client the
// vendor deleted from a page already read is removed.
func TestAResyncAskedMidReconciliationIsAnsweredByTheNextOne(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New(epoch)
	vendor := readmodelsim.NewVendor(clock.Now, 3)
	for i := range 10 {
		vendor.Put(practice.Clients, fmt.Sprintf("cli_%03d", i), "Client")
		vendor.Put(practice.Jobs, fmt.Sprintf("job_%03d", i), "Job")
	}
	reader := &askedMidPass{Vendor: vendor}
	s, m := simSyncer(clock, readmodelsim.NewStore(clock.Now), reader, "one")
	tick := func(n int) {
		for range n {
			s.Tick(ctx)
			clock.Advance(time.Second)
		}
	}
	tick(20)
	if f, _ := m.Freshness(practice.Clients); !f.Backfilled || m.Count(practice.Clients) != 10 {
		t.Fatalf("clients after the backfill: %d, %+v", m.Count(practice.Clients), f)
	}

	var gone string
	reader.during = func(shown []json.RawMessage) {
		var c struct{ ID string }
		if err := json.Unmarshal(shown[0], &c); err != nil {
			t.Fatal(err)
		}
		gone = c.ID
		clock.Advance(time.Second)
		vendor.Delete(practice.Clients, gone)
		if err := s.Resync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	// Well within the hour's reconciliation interval and the minute's
	// poll, which would not find a deletion anyway.
	tick(20)
	if gone == "" {
		t.Fatal("no reconciliation listed the clients after the first resync")
	}
	if _, err := m.Get(ctx, live, practice.Clients, gone); err == nil {
		t.Fatalf("%s, deleted at the vendor before the second resync was asked, is still served", gone)
	}
	if got := m.Count(practice.Clients); got != 9 {
		t.Fatalf("%d clients, want the vendor's 9", got)
	}
}
