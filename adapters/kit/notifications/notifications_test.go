package notifications_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Notifications(t, func(t *testing.T) (storetest.NotificationInbox, storetest.NotificationInbox) {
		m := notifications.NewMemory(nil)
		return m, m
	})
}

// reads is what a receiver read, and a way to fail reads.
type reads struct {
	mu   sync.Mutex
	got  []string
	fail map[string]error
	// block, when set, holds each read until ctx ends.
	block bool
}

func (r *reads) read(ctx context.Context, items []notifications.Kept) ([]string, error) {
	return notifications.Each(ctx, items, 2, func(ctx context.Context, k notifications.Kept) error {
		if r.block {
			<-ctx.Done()
			return ctx.Err()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.fail[string(k.Item)]; err != nil {
			return err
		}
		r.got = append(r.got, string(k.Item))
		return nil
	})
}

func (r *reads) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.got)
	slices.Sort(out)
	return out
}

func items(s ...string) [][]byte {
	var out [][]byte
	for _, v := range s {
		out = append(out, []byte(v))
	}
	return out
}

// A body is kept and what it names read before it is answered; the same
// body again is acknowledged unread.
func TestReceiveReadsOnceABody(t *testing.T) {
	ctx := context.Background()
	var r reads
	rc := notifications.Receiver{Inbox: notifications.NewMemory(nil), Scope: "karbon/frm_acme/records", Read: r.read, Batch: 2}
	body := []byte(`{"ResourcePermaKey":"W1"}`)
	for i, want := range []bool{false, true} {
		repeat, err := rc.Receive(ctx, body, items("W1", "W2", "W3"))
		if err != nil || repeat != want {
			t.Fatalf("delivery %d: repeat %v, %v", i, repeat, err)
		}
	}
	if got := r.all(); !slices.Equal(got, []string{"W1", "W2", "W3"}) {
		t.Fatalf("read %v, want each item once", got)
	}
}

// A read that fails is tried again later, not at once: with no sync to
// read it the delivery is answered as failed, and the vendor's
// redelivery (a repeat of the body, which keeps nothing more) reads on.
func TestReceiveLeavesAFailedReadForLater(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := reads{fail: map[string]error{"W2": errors.New("karbon is down")}}
	rc := notifications.Receiver{Inbox: notifications.NewMemory(clock), Scope: "s", Read: r.read}
	body := []byte("b")
	if _, err := rc.Receive(ctx, body, items("W1", "W2")); err == nil {
		t.Fatal("a delivery whose read failed, with no sync, answered as done")
	}
	if got := r.all(); !slices.Equal(got, []string{"W1"}) {
		t.Fatalf("read %v", got)
	}
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	if rc.Receive(ctx, body, items("W1", "W2")); len(r.all()) != 1 {
		t.Fatalf("a redelivery at once read %v: a failed read is tried again later, not at once", r.all())
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if repeat, err := rc.Receive(ctx, body, items("W1", "W2")); !repeat || err != nil {
		t.Fatalf("a redelivery a minute later: repeat %v, %v", repeat, err)
	}
	if got := r.all(); !slices.Equal(got, []string{"W1", "W2"}) {
		t.Fatalf("read %v", got)
	}
}

// A delivery that cannot read everything in its time is answered at once
// all the same, with the sync woken to read the rest; nothing is lost,
// and the item cut short is due again at once for whoever reads next.
func TestReceiveWakesTheSyncForWhatIsLeft(t *testing.T) {
	inbox := notifications.NewMemory(nil)
	r := reads{block: true}
	woken := 0
	rc := notifications.Receiver{Inbox: inbox, Scope: "s", Read: r.read, Batch: 1,
		Wake: func(context.Context) error { woken++; return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := rc.Receive(ctx, []byte("b"), items("1", "2", "3")); err != nil || woken != 1 {
		t.Fatalf("answered %v, woken %d times", err, woken)
	}
	r.block = false
	sync := notifications.Receiver{Inbox: inbox, Scope: "s", Read: r.read}
	if more, err := sync.Drain(context.Background()); more || err != nil {
		t.Fatalf("the sync's drain: more %v, %v", more, err)
	}
	if got := r.all(); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("the sync read %v, want everything the delivery left", got)
	}
}

// A read the vendor refuses until the firm acts (a grant revoked), with a
// sync to read what is left: the delivery is answered as received, for the
// vendor's redeliveries cannot help, and the sync is woken; the item stays
// kept and is read once the reads succeed again (the firm reconnected),
// after the failed read's wait, not at once.
func TestAFailedReadWithASyncIsAnsweredAndKept(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	refused := errors.New("xero refused the connection's grant (invalid_grant)")
	r := reads{fail: map[string]error{"INV-3": refused}}
	woken := 0
	inbox := notifications.NewMemory(clock)
	rc := notifications.Receiver{Inbox: inbox, Scope: "xero/frm_acme/org", Read: r.read,
		Wake: func(context.Context) error { woken++; return nil }}
	if repeat, err := rc.Receive(ctx, []byte("b"), items("INV-3")); err != nil || repeat || woken != 1 {
		t.Fatalf("a delivery whose read was refused: repeat %v, %v, woken %d times; want it answered and the sync woken", repeat, err, woken)
	}
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	if more, err := rc.Drain(ctx); more || err != nil || len(r.all()) != 0 {
		t.Fatalf("a drain at once: more %v, %v, read %v; the refused item waits", more, err, r.all())
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if more, err := rc.Drain(ctx); more || err != nil {
		t.Fatalf("the sync's drain after the reconnect: more %v, %v", more, err)
	}
	if got := r.all(); !slices.Equal(got, []string{"INV-3"}) {
		t.Fatalf("read %v, want the item the refused delivery kept", got)
	}
}

// An item no read has managed within the window is dropped: the sync's
// polls and reconciliation have made it good by then.
func TestItemsOlderThanTheWindowAreDropped(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	m := notifications.NewMemory(func() time.Time { return now })
	if ok, err := m.KeepNotification(ctx, "s", "b", items("old")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	now = now.Add(notifications.Window)
	if got, err := m.TakeNotifications(ctx, "s", 10, time.Second); len(got) != 0 || err != nil {
		t.Fatalf("took %v, %v", got, err)
	}
	if ok, _ := m.KeepNotification(ctx, "s", "b", items("again")); !ok {
		t.Fatal("a body kept an hour ago is still known")
	}
}

func TestLimitReadsEachRecordOnceUpToTheBound(t *testing.T) {
	its := []string{"a", "b", "a", "c", "a", "d", "b", "e"}
	kept, over := notifications.Limit(its, func(s string) string { return s }, 3)
	if len(kept) != 3 || kept[0] != "a" || kept[1] != "b" || kept[2] != "c" || over != 2 {
		t.Fatalf("kept %v, over %d", kept, over)
	}
}

// With One, a burst of deliveries leaves its items to the one drain under
// way in the process, which takes them in batches: every item is read,
// in fewer reads than deliveries.
func TestOneDrainTakesABurstInBatches(t *testing.T) {
	inbox := notifications.NewMemory(nil)
	var one notifications.One
	var mu sync.Mutex
	var got []string
	reads := 0
	read := func(ctx context.Context, items []notifications.Kept) ([]string, error) {
		time.Sleep(5 * time.Millisecond) // a vendor's call
		mu.Lock()
		defer mu.Unlock()
		reads++
		for _, k := range items {
			got = append(got, string(k.Item))
		}
		return nil, nil
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc := notifications.Receiver{Inbox: inbox, Scope: "s", Read: read, Batch: 40, One: &one,
				Wake: func(context.Context) error { return nil }}
			if _, err := rc.Receive(context.Background(), []byte{byte(i)}, items(string(rune('A'+i)))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 50 || reads >= 50 {
		t.Fatalf("%d items read in %d reads", len(got), reads)
	}
}

// A delivery that finds a drain under way is answered once that drain has
// read its items too, not before; and when the drain under way is cut
// short, the delivery waiting reads them itself.
func TestADeliveryWaitsForTheDrainUnderWay(t *testing.T) {
	inbox := notifications.NewMemory(nil)
	var one notifications.One
	var mu sync.Mutex
	read := map[string]bool{}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rc := notifications.Receiver{Inbox: inbox, Scope: "s", One: &one, Batch: 10,
		Read: func(ctx context.Context, items []notifications.Kept) ([]string, error) {
			if string(items[0].Item) == "first" {
				once.Do(func() { close(started) })
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range items {
				read[string(k.Item)] = true
			}
			return nil, nil
		}}
	firstCtx, cut := context.WithCancel(context.Background())
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		rc.Receive(firstCtx, []byte("1"), items("first"))
	}()
	<-started
	secondDone := make(chan error, 1)
	go func() {
		_, err := rc.Receive(context.Background(), []byte("2"), items("second"))
		secondDone <- err
	}()
	select {
	case err := <-secondDone:
		t.Fatalf("the second delivery was answered (%v) while the drain under way had not read its item", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	<-firstDone
	mu.Lock()
	if !read["first"] || !read["second"] {
		t.Fatalf("read %v", read)
	}
	mu.Unlock()

	// The drain under way is cut short: the delivery waiting reads on.
	cut()
	started, release, once = make(chan struct{}), make(chan struct{}), sync.Once{}
	holderCtx, stop := context.WithCancel(context.Background())
	holderDone := make(chan struct{})
	go func() {
		defer close(holderDone)
		rc.Receive(holderCtx, []byte("3"), items("first"))
	}()
	<-started
	go func() {
		_, err := rc.Receive(context.Background(), []byte("4"), items("third"))
		secondDone <- err
	}()
	time.Sleep(20 * time.Millisecond)
	stop()
	<-holderDone
	close(release)
	select {
	case err := <-secondDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery waiting never read on after the drain under way stopped")
	}
	mu.Lock()
	defer mu.Unlock()
	if !read["third"] {
		t.Fatalf("read %v", read)
	}
}

// A drain with Gather waits while a burst still arrives, for GatherFor
// in all: a burst whose deliveries come closer together than Gather is
// read in one call, however it is spread; a lone item waits one Gather;
// a stream that never stops is read a call every GatherFor at most; and
// every item is read once. Time is synctest's, the arrivals seeded.
func TestGatherWaitsWhileABurstArrives(t *testing.T) {
	const gather, gatherFor = 50 * time.Millisecond, 500 * time.Millisecond
	type read struct {
		at    time.Duration // after the first arrival
		items int
	}
	// run delivers one item at each of arrivals (after the start) and
	// answers the reads made.
	run := func(t *testing.T, arrivals []time.Duration) (reads []read, got map[string]int) {
		synctest.Test(t, func(t *testing.T) {
			inbox := notifications.NewMemory(nil)
			var one notifications.One
			var mu sync.Mutex
			got = map[string]int{}
			start := time.Now()
			rc := notifications.Receiver{Inbox: inbox, Scope: "s", Batch: 100, One: &one, Gather: gather, GatherFor: gatherFor,
				Wake: func(context.Context) error { return nil },
				Read: func(ctx context.Context, items []notifications.Kept) ([]string, error) {
					mu.Lock()
					defer mu.Unlock()
					reads = append(reads, read{time.Since(start), len(items)})
					for _, k := range items {
						got[string(k.Item)]++
					}
					return nil, nil
				}}
			var wg sync.WaitGroup
			for i, at := range arrivals {
				wg.Go(func() {
					time.Sleep(at)
					if _, err := rc.Receive(context.Background(), fmt.Appendf(nil, "body %d", i), items(fmt.Sprint("item ", i))); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		})
		return reads, got
	}
	for seed := range int64(20) {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		// A burst of up to 100, each within Gather of the one before.
		n := 1 + rng.IntN(100)
		var burst []time.Duration
		at := time.Duration(0)
		for range n {
			burst = append(burst, at)
			at += time.Duration(rng.Int64N(int64(gather*9/10/time.Millisecond))) * time.Millisecond
		}
		rng.Shuffle(len(burst), func(i, j int) { burst[i], burst[j] = burst[j], burst[i] })
		reads, got := run(t, burst)
		span := slices.Max(burst)
		if span+gather < gatherFor && len(reads) != 1 {
			t.Fatalf("seed %d: a burst of %d over %s read in %d calls: %v", seed, n, span, len(reads), reads)
		}
		if len(got) != n {
			t.Fatalf("seed %d: %d of %d items read", seed, len(got), n)
		}
		for item, times := range got {
			if times != 1 {
				t.Fatalf("seed %d: %s read %d times", seed, item, times)
			}
		}
	}

	reads, _ := run(t, []time.Duration{0})
	if len(reads) != 1 || reads[0].at != gather {
		t.Fatalf("a lone item was read %v, not once after %s", reads, gather)
	}

	var stream []time.Duration
	for i := range 100 {
		stream = append(stream, time.Duration(i)*20*time.Millisecond) // 2 s of one every 20 ms
	}
	reads, got := run(t, stream)
	if len(got) != 100 {
		t.Fatalf("%d of 100 items of a stream read", len(got))
	}
	prev := time.Duration(0)
	for _, r := range reads {
		if r.at-prev > gatherFor+gather {
			t.Fatalf("a stream's reads %v: one waited more than %s", reads, gatherFor+gather)
		}
		prev = r.at
	}
	if len(reads) < 4 || len(reads) > 8 {
		t.Fatalf("a stream of 2 s read in %d calls, not one each %s or so: %v", len(reads), gatherFor, reads)
	}
}
