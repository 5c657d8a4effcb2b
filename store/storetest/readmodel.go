package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// upd is an update of a record to raw; "" removes it.
func upd(kind practice.Kind, id, raw string) readmodel.Update {
	u := readmodel.Update{Kind: kind, ID: id}
	if raw != "" {
		u.Raw = []byte(raw)
	}
	return u
}

// modelOf is what Load gives of a firm's model: kind/id -> raw.
func modelOf(t *testing.T, s readmodel.Store, firm string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := s.Load(ctx, firm, func(u readmodel.Update) error {
		k := string(u.Kind) + "/" + u.ID
		if _, dup := got[k]; dup {
			t.Errorf("Load gave %s twice", k)
		}
		got[k] = string(u.Raw)
		return nil
	})
	if err != nil {
		t.Fatalf("loading %s: %v", firm, err)
	}
	return got
}

func apply(t *testing.T, s readmodel.Store, firm string, us ...readmodel.Update) {
	t.Helper()
	if err := s.Apply(ctx, firm, us); err != nil {
		t.Fatalf("applying to %s: %v", firm, err)
	}
}

// ReadModel checks a readmodel.Store: what is applied is loaded back byte
// for byte, the last update of a record wins, a nil Raw removes it, and
// firms are apart. open returns an empty store and a second handle on the
// same state.
func ReadModel(t *testing.T, open func(t *testing.T) (store, reopen readmodel.Store)) {
	st, other := open(t)
	if got := modelOf(t, other, "frm_a"); len(got) != 0 {
		t.Fatalf("an empty store's model: %v", got)
	}
	// Bytes JSON encoders would escape or normalize come back as they went.
	odd := `{"id":"cli_1","name":"Smith & Jones <Ltd>","note":"caf\u00e9 é"}`
	apply(t, st, "frm_a",
		upd(practice.Clients, "cli_1", `{"id":"cli_1","name":"Acme"}`),
		upd(practice.Clients, "cli_2", `{"id":"cli_2","name":"Bolt"}`),
		upd(practice.Jobs, "job_1", `{"id":"job_1"}`),
		upd(practice.Clients, "cli_1", odd),
		upd(practice.Clients, "cli_9", ""), // never there
	)
	apply(t, st, "frm_b", upd(practice.Clients, "cli_1", `{"id":"cli_1","name":"Other firm"}`))
	want := map[string]string{"clients/cli_1": odd, "clients/cli_2": `{"id":"cli_2","name":"Bolt"}`, "jobs/job_1": `{"id":"job_1"}`}
	if got := modelOf(t, other, "frm_a"); !maps.Equal(got, want) {
		t.Fatalf("model after applying:\n%v\nwant\n%v", got, want)
	}

	apply(t, other, "frm_a", upd(practice.Clients, "cli_2", ""), upd(practice.Jobs, "job_1", ""), upd(practice.Jobs, "job_1", `{"id":"job_1","v":2}`))
	want = map[string]string{"clients/cli_1": odd, "jobs/job_1": `{"id":"job_1","v":2}`}
	if got := modelOf(t, st, "frm_a"); !maps.Equal(got, want) {
		t.Fatalf("model after a removal and a removal undone:\n%v\nwant\n%v", got, want)
	}
	if got, want := modelOf(t, st, "frm_b"), map[string]string{"clients/cli_1": `{"id":"cli_1","name":"Other firm"}`}; !maps.Equal(got, want) {
		t.Fatalf("another firm's model: %v, want %v", got, want)
	}

	stop := errors.New("stop")
	n := 0
	err := st.Load(ctx, "frm_a", func(readmodel.Update) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Load after fn failed: %d calls, %v; want 1 call and fn's error", n, err)
	}

	// Every kind, and more records than a store reads at once.
	var us []readmodel.Update
	want = map[string]string{}
	for _, k := range practice.Kinds {
		us = append(us, upd(k, "rec_1", `{"kind":"`+string(k)+`"}`))
		want[string(k)+"/rec_1"] = `{"kind":"` + string(k) + `"}`
	}
	for i := range 2500 {
		id := fmt.Sprintf("doc_%04d", i)
		us = append(us, upd(practice.Documents, id, `{"id":"`+id+`"}`))
		want["documents/"+id] = `{"id":"` + id + `"}`
	}
	apply(t, st, "frm_big", us...)
	if got := modelOf(t, other, "frm_big"); !maps.Equal(got, want) {
		t.Fatalf("a large model loaded %d records, want %d", len(got), len(want))
	}
}

// ReadModelFeedBackend is a store shared between instances, and its feed.
type ReadModelFeedBackend struct {
	Store readmodel.Store
	// Feed is another instance's handle on the same state.
	Feed readmodel.UpdateFeed
	// Trim drops all but the newest keep updates of the firm's feed, as
	// the store's own trimming does after many updates.
	Trim func(firm string, keep int)
}

// follow reads the firm's feed from pos to its end, n at a time.
func follow(t *testing.T, f readmodel.UpdateFeed, firm, pos string, n int) ([]readmodel.Update, string) {
	t.Helper()
	var all []readmodel.Update
	for {
		us, next, err := f.Since(ctx, firm, pos, n)
		if err != nil {
			t.Fatalf("following %s from %q: %v", firm, pos, err)
		}
		if len(us) > n {
			t.Fatalf("Since gave %d updates for n %d", len(us), n)
		}
		if len(us) == 0 {
			if next != pos {
				t.Fatalf("Since(%q) gave nothing at %q, want the same position", pos, next)
			}
			return all, pos
		}
		all, pos = append(all, us...), next
	}
}

func sameUpdates(a, b []readmodel.Update) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].ID != b[i].ID || string(a[i].Raw) != string(b[i].Raw) || (a[i].Raw == nil) != (b[i].Raw == nil) ||
			!a[i].ReadAt.Equal(b[i].ReadAt) {
			return false
		}
	}
	return true
}

// ReadModelFeed checks a readmodel.UpdateFeed: every update, removals included,
// once and in the order applied, from any handle; positions that resume
// where the last read ended; firms apart; a position whose later updates
// were trimmed is ErrGap; and under concurrent Applies the feed, replayed,
// is the model Load gives. open returns an empty store.
func ReadModelFeed(t *testing.T, open func(t *testing.T) ReadModelFeedBackend) {
	b := open(t)
	if hs, ok := b.Store.(headStore); ok {
		t.Run("writes after a head", func(t *testing.T) { testApplyAfter(t, hs, b.Feed) })
	}
	if head, err := b.Feed.Head(ctx, "frm_a"); err != nil || head != "" {
		t.Fatalf("an empty feed's head: %q, %v; want \"\"", head, err)
	}
	if us, pos, err := b.Feed.Since(ctx, "frm_a", "", 10); err != nil || len(us) != 0 || pos != "" {
		t.Fatalf("following an empty feed: %v at %q (%v), want nothing at \"\"", us, pos, err)
	}
	first := []readmodel.Update{
		upd(practice.Clients, "cli_1", `{"id":"cli_1","v":1}`),
		upd(practice.Jobs, "job_1", `{"id":"job_1"}`),
	}
	// When a state's read began travels with it, to the nanosecond.
	first[1].ReadAt = time.Date(2026, 3, 2, 9, 0, 0, 123456789, time.UTC)
	then := []readmodel.Update{
		upd(practice.Clients, "cli_1", `{"id":"cli_1","v":2}`),
		upd(practice.Clients, "cli_1", ""),
	}
	apply(t, b.Store, "frm_a", first...)
	apply(t, b.Store, "frm_b", upd(practice.Clients, "cli_b", `{"id":"cli_b"}`))
	apply(t, b.Store, "frm_a", then...)
	want := append(append([]readmodel.Update(nil), first...), then...)

	head, err := b.Feed.Head(ctx, "frm_a")
	if err != nil || head == "" {
		t.Fatalf("head after updates: %q, %v", head, err)
	}
	got, pos := follow(t, b.Feed, "frm_a", "", 10)
	if !sameUpdates(got, want) {
		t.Fatalf("feed from the start:\n%v\nwant\n%v", got, want)
	}
	if pos != head {
		t.Fatalf("following ends at %q, the head is %q", pos, head)
	}
	// Three, then the last one, resuming from the first read's position.
	us, mid, err := b.Feed.Since(ctx, "frm_a", "", 3)
	if err != nil || !sameUpdates(us, want[:3]) {
		t.Fatalf("the first three: %v (%v), want %v", us, err, want[:3])
	}
	if us, end, err := b.Feed.Since(ctx, "frm_a", mid, 3); err != nil || !sameUpdates(us, want[3:]) || end != head {
		t.Fatalf("after the first three: %v at %q (%v), want %v at %q", us, end, err, want[3:], head)
	}
	if got, _ := follow(t, b.Feed, "frm_b", "", 10); !sameUpdates(got, []readmodel.Update{upd(practice.Clients, "cli_b", `{"id":"cli_b"}`)}) {
		t.Fatalf("another firm's feed: %v", got)
	}

	// The head yields only what is applied later.
	more := []readmodel.Update{upd(practice.People, "per_1", `{"id":"per_1"}`)}
	apply(t, b.Store, "frm_a", more...)
	if got, _ := follow(t, b.Feed, "frm_a", head, 1); !sameUpdates(got, more) {
		t.Fatalf("feed after the head: %v, want %v", got, more)
	}

	if b.Trim != nil {
		testReadModelFeedGap(t, b)
	}
	testReadModelFeedConcurrent(t, b)
}

func testReadModelFeedGap(t *testing.T, b ReadModelFeedBackend) {
	before, err := b.Feed.Head(ctx, "frm_a")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		apply(t, b.Store, "frm_a", upd(practice.Jobs, "job_1", fmt.Sprintf(`{"id":"job_1","v":%d}`, i)))
	}
	head, err := b.Feed.Head(ctx, "frm_a")
	if err != nil {
		t.Fatal(err)
	}
	_, last, err := b.Feed.Since(ctx, "frm_a", before, 4)
	if err != nil {
		t.Fatal(err)
	}
	b.Trim("frm_a", 1)
	for _, pos := range []string{"", before} {
		if us, _, err := b.Feed.Since(ctx, "frm_a", pos, 10); !errors.Is(err, readmodel.ErrGap) {
			t.Fatalf("following from %q, before the trimmed updates: %v (%v), want ErrGap", pos, us, err)
		}
	}
	// last is the trimmed update just before the one kept: nothing after
	// it is lost, but a store may not know that, and ErrGap is safe.
	if us, _, err := b.Feed.Since(ctx, "frm_a", last, 10); err != nil && !errors.Is(err, readmodel.ErrGap) {
		t.Fatalf("following from the last trimmed update: %v", err)
	} else if err == nil && !sameUpdates(us, []readmodel.Update{upd(practice.Jobs, "job_1", `{"id":"job_1","v":4}`)}) {
		t.Fatalf("following from the last trimmed update: %v, want the one kept", us)
	}
	if us, pos, err := b.Feed.Since(ctx, "frm_a", head, 10); err != nil || len(us) != 0 || pos != head {
		t.Fatalf("following from the head after trimming: %v at %q (%v), want nothing at %q", us, pos, err, head)
	}
	if us, _, err := b.Feed.Since(ctx, "frm_b", "", 10); err != nil || len(us) != 1 {
		t.Fatalf("another firm's feed after trimming: %v (%v)", us, err)
	}
}

// Applies racing on the same records: replaying the feed gives the model
// Load does, so a follower ends where the store is.
func testReadModelFeedConcurrent(t *testing.T, b ReadModelFeedBackend) {
	const firm = "frm_race"
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				id := fmt.Sprintf("cli_%d", i%5)
				raw := fmt.Sprintf(`{"id":%q,"by":%d,"n":%d}`, id, w, i)
				if i%7 == 6 {
					raw = ""
				}
				if err := b.Store.Apply(ctx, firm, []readmodel.Update{upd(practice.Clients, id, raw), upd(practice.Jobs, id, raw)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	replayed := map[string]string{}
	got, _ := follow(t, b.Feed, firm, "", 7)
	for _, u := range got {
		if u.Raw == nil {
			delete(replayed, string(u.Kind)+"/"+u.ID)
		} else {
			replayed[string(u.Kind)+"/"+u.ID] = string(u.Raw)
		}
	}
	if len(got) != 4*25*2 {
		t.Fatalf("the feed holds %d updates, %d were applied", len(got), 4*25*2)
	}
	if loaded := modelOf(t, b.Store, firm); !maps.Equal(replayed, loaded) {
		t.Fatalf("the feed replayed:\n%v\nLoad:\n%v", replayed, loaded)
	}
}

// Checkpoints checks a readmodel.Checkpoints: nil for a name never saved,
// the last value saved (an empty one is not nil) from any handle. open
// returns an empty store and a second handle on the same state.
func Checkpoints(t *testing.T, open func(t *testing.T) (store, reopen readmodel.Checkpoints)) {
	st, other := open(t)
	if got, err := st.Checkpoint(ctx, "karbon/frm_a"); err != nil || got != nil {
		t.Fatalf("never saved: %q, %v; want nil, nil", got, err)
	}
	for _, v := range []string{`{"cursor":"p1"}`, `{"cursor":"p2","backfilled":true}`, ""} {
		if err := st.SaveCheckpoint(ctx, "karbon/frm_a", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := other.Checkpoint(ctx, "karbon/frm_a")
		if err != nil || got == nil || string(got) != v {
			t.Fatalf("after saving %q: %q (nil %t), %v", v, got, got == nil, err)
		}
	}
	if got, err := other.Checkpoint(ctx, "karbon/frm_b"); err != nil || got != nil {
		t.Fatalf("another name: %q, %v; want nil, nil", got, err)
	}
}

// Leases checks a readmodel.Leases: one holder at a time; renewing sets
// the expiry to ttl from now; only the holder releases; an expired lease
// is another's to take, and its old holder can then neither renew nor
// release it. a and b are two instances' handles on one empty store.
func Leases(t *testing.T, open func(t *testing.T) (a, b readmodel.Leases)) {
	a, b := open(t)
	lease := func(l readmodel.Leases, name, holder string, ttl time.Duration, want bool) {
		t.Helper()
		if got, err := l.Lease(ctx, name, holder, ttl); err != nil || got != want {
			t.Fatalf("%s leasing %s: %t, %v; want %t", holder, name, got, err, want)
		}
	}
	release := func(l readmodel.Leases, name, holder string) {
		t.Helper()
		if err := l.Release(ctx, name, holder); err != nil {
			t.Fatalf("%s releasing %s: %v", holder, name, err)
		}
	}
	const name, other = "sync/karbon/frm_a", "sync/xero/frm_a"
	lease(a, name, "inst-1", time.Minute, true)
	lease(b, name, "inst-2", time.Minute, false)
	lease(b, name, "inst-1", time.Minute, true) // renewed, from any handle
	lease(b, other, "inst-2", time.Minute, true)
	release(b, name, "inst-2")
	lease(b, name, "inst-2", time.Minute, false)
	release(a, name, "inst-1")
	lease(b, name, "inst-2", time.Minute, true)
	lease(a, name, "inst-1", time.Minute, false)

	// Renewing with a short ttl shortens the lease: the expiry is ttl from
	// the renewal, not the later of the two.
	const short = 200 * time.Millisecond
	renewed := time.Now()
	lease(b, name, "inst-2", short, true)
	deadline := renewed.Add(10 * time.Second)
	for {
		ok, err := a.Lease(ctx, name, "inst-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lease renewed for %v was still held after 10s", short)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Stores keep whole milliseconds, on a clock that may be a
	// millisecond behind this one.
	if held := time.Since(renewed); held < short-5*time.Millisecond {
		t.Fatalf("a lease renewed for %v was taken by another after %v", short, held)
	}
	lease(b, name, "inst-2", time.Minute, false)
	release(b, name, "inst-2")
	lease(b, name, "inst-2", time.Minute, false)
	lease(a, other, "inst-1", time.Minute, false)
}

// LeasedCheckpoints is a store's checkpoints and leases together.
type LeasedCheckpoints interface {
	readmodel.Checkpoints
	readmodel.Leases
}

// FencedCheckpoints checks that SaveHeldCheckpoint saves only for the
// holder of an unexpired lease: a sync step that ends after its lease
// expired and was taken saves nothing over the new holder's progress, and
// neither does a holder that released it. a and b are two instances'
// handles on one empty store.
func FencedCheckpoints(t *testing.T, open func(t *testing.T) (a, b LeasedCheckpoints)) {
	a, b := open(t)
	const lease, name = "sync/frm_a/records", "sync/frm_a/records"
	saveHeld := func(c readmodel.Checkpoints, holder, v string, want bool) {
		t.Helper()
		ok, err := c.SaveHeldCheckpoint(ctx, name, []byte(v), lease, holder)
		if err != nil || ok != want {
			t.Fatalf("%s saving %s under the lease: %t, %v; want %t", holder, v, ok, err, want)
		}
	}
	checkpoint := func(want string) {
		t.Helper()
		if got, err := b.Checkpoint(ctx, name); err != nil || string(got) != want {
			t.Fatalf("checkpoint %q, %v; want %q", got, err, want)
		}
	}
	saveHeld(a, "inst-1", `{"step":1}`, false) // no one holds it
	checkpoint("")
	const short = 200 * time.Millisecond
	if ok, err := a.Lease(ctx, lease, "inst-1", short); err != nil || !ok {
		t.Fatalf("inst-1 leasing: %t, %v", ok, err)
	}
	saveHeld(a, "inst-1", `{"step":1}`, true)
	saveHeld(b, "inst-2", `{"step":"other"}`, false)
	checkpoint(`{"step":1}`)

	// inst-1's lease expires in the middle of a step and inst-2 takes it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := b.Lease(ctx, lease, "inst-2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lease of %v was still held after 10s", short)
		}
		time.Sleep(10 * time.Millisecond)
	}
	saveHeld(b, "inst-2", `{"step":2}`, true)
	saveHeld(a, "inst-1", `{"step":1,"late":true}`, false)
	checkpoint(`{"step":2}`)

	if err := b.Release(ctx, lease, "inst-2"); err != nil {
		t.Fatal(err)
	}
	saveHeld(b, "inst-2", `{"step":3}`, false)
	checkpoint(`{"step":2}`)
}

// headStore is what a shared store offers the model for writes that must
// not land after another instance's (readmodel's own is unexported).
type headStore interface {
	ApplyAfter(ctx context.Context, firm, head string, us []readmodel.Update) (string, bool, error)
}

// testApplyAfter checks a conditional write: taken only while the feed's
// newest position is the one given, refused with nothing written
// otherwise, and under writers racing, each position taken by one of them.
func testApplyAfter(t *testing.T, s headStore, f readmodel.UpdateFeed) {
	firm := "frm_cond"
	one := []readmodel.Update{upd(practice.Clients, "cli_1", `{"id":"cli_1","v":1}`)}
	if _, ok, err := s.ApplyAfter(ctx, firm, "9-9", one); err != nil || ok {
		t.Fatalf("a write after a head the feed does not have: ok %v, %v", ok, err)
	}
	if head, _ := f.Head(ctx, firm); head != "" {
		t.Fatalf("a refused write moved the head to %q", head)
	}
	next, ok, err := s.ApplyAfter(ctx, firm, "", one)
	if err != nil || !ok {
		t.Fatalf("a write after the empty feed's head: ok %v, %v", ok, err)
	}
	if head, _ := f.Head(ctx, firm); head != next {
		t.Fatalf("the write said it ends at %q, the feed's head is %q", next, head)
	}
	if _, ok, _ := s.ApplyAfter(ctx, firm, "", one); ok {
		t.Fatal("a second write after the same head was taken")
	}
	if _, ok, err := s.ApplyAfter(ctx, firm, next, one); err != nil || !ok {
		t.Fatalf("a write after the new head: ok %v, %v", ok, err)
	}

	var taken atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				head, err := f.Head(ctx, firm)
				if err != nil {
					t.Error(err)
					return
				}
				u := upd(practice.Clients, "cli_race", fmt.Sprintf(`{"id":"cli_race","w":%d,"i":%d}`, w, i))
				if _, ok, err := s.ApplyAfter(ctx, firm, head, []readmodel.Update{u}); err != nil {
					t.Error(err)
					return
				} else if ok {
					taken.Add(1)
				}
			}
		})
	}
	wg.Wait()
	us, _ := follow(t, f, firm, next, 1000)
	// The feed after next holds the second write, then one entry per
	// write taken: none lost, none taken twice.
	if int64(len(us)) != 1+taken.Load() {
		t.Fatalf("%d writes taken by racing writers, the feed has %d after them", taken.Load(), len(us)-1)
	}
}

// PurgeStore is a read model store that purges a firm system's copy.
type PurgeStore interface {
	readmodel.Store
	readmodel.Checkpoints
	readmodel.Purger
}

// ReadModelPurge checks a readmodel.Purger: the kinds named lose every
// record and tombstone and the checkpoints named are gone, while the
// firm's other kinds, other firms and other checkpoints stay; purging
// again, or what was never there, is no error. open returns an empty store
// and a second handle on the same state.
func ReadModelPurge(t *testing.T, open func(t *testing.T) (store, reopen PurgeStore)) {
	st, other := open(t)
	tomb := `{"id":"job_2","deleted":true,"removed_at":"2026-03-01T09:00:00Z"}`
	apply(t, st, "frm_a",
		upd(practice.Clients, "cli_1", `{"id":"cli_1"}`),
		upd(practice.Jobs, "job_1", `{"id":"job_1"}`),
		upd(practice.Jobs, "job_2", tomb),
		upd(practice.Invoices, "inv_1", `{"id":"inv_1"}`))
	apply(t, st, "frm_b", upd(practice.Jobs, "job_1", `{"id":"job_1","firm":"b"}`))
	records := readmodel.SyncCheckpoints("frm_a", "records")
	for _, name := range append(slices.Clone(records), "sync/frm_a/ledger", "sync/frm_b/records") {
		if err := st.SaveCheckpoint(ctx, name, []byte(`{"kinds":{}}`)); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []practice.Kind{practice.Clients, practice.Engagements, practice.Jobs, practice.People}
	for range 2 {
		if err := other.Purge(ctx, "frm_a", kinds, records); err != nil {
			t.Fatalf("purge: %v", err)
		}
	}
	if got, want := modelOf(t, st, "frm_a"), map[string]string{"invoices/inv_1": `{"id":"inv_1"}`}; !maps.Equal(got, want) {
		t.Errorf("frm_a after purging its records: %v, want %v", got, want)
	}
	if got, want := modelOf(t, st, "frm_b"), map[string]string{"jobs/job_1": `{"id":"job_1","firm":"b"}`}; !maps.Equal(got, want) {
		t.Errorf("another firm after the purge: %v, want %v", got, want)
	}
	for _, name := range records {
		if got, err := st.Checkpoint(ctx, name); err != nil || got != nil {
			t.Errorf("checkpoint %s after the purge: %q, %v; want nil", name, got, err)
		}
	}
	for _, name := range []string{"sync/frm_a/ledger", "sync/frm_b/records"} {
		if got, err := st.Checkpoint(ctx, name); err != nil || got == nil {
			t.Errorf("checkpoint %s, not purged: %q, %v; want it kept", name, got, err)
		}
	}
	if err := other.Purge(ctx, "frm_never", kinds, []string{"sync/frm_never/records"}); err != nil {
		t.Errorf("purging a firm with nothing stored: %v", err)
	}
}

// FencedStore is a read model store whose writes a fence guards.
type FencedStore interface {
	readmodel.Store
	readmodel.Checkpoints
	readmodel.Leases
	readmodel.Fencer
}

// ReadModelFences checks a readmodel.Fencer: with no fence every
// generation writes; once a fence is raised, a write or checkpoint of an
// older generation is ErrFenced with nothing written, while the fence's
// generation and newer ones write; a fence is never lowered, and one
// firm's or name's fence leaves the others alone. a and b are two
// instances' handles on one empty store.
func ReadModelFences(t *testing.T, open func(t *testing.T) (a, b FencedStore)) {
	a, b := open(t)
	old := readmodel.Fence{Firm: "frm_a", Name: "con_1", Generation: 1}
	now := readmodel.Fence{Firm: "frm_a", Name: "con_1", Generation: 2}
	write := func(s FencedStore, f readmodel.Fence, id string, after *string) error {
		t.Helper()
		_, ok, err := s.ApplyFenced(ctx, f, after, []readmodel.Update{upd(practice.Invoices, id, `{"id":"`+id+`"}`)})
		if err == nil && !ok {
			t.Fatalf("an unconditional write of %s was not taken", id)
		}
		return err
	}
	if err := write(a, old, "inv_before", nil); err != nil {
		t.Fatalf("a write with no fence raised: %v", err)
	}
	for range 2 {
		if err := b.RaiseFence(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.RaiseFence(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := write(a, old, "inv_stale", nil); !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("a write of the generation before the fence: %v, want ErrFenced (a fence is never lowered)", err)
	}
	head := ""
	if err := write(a, old, "inv_stale_after", &head); !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("a conditional write of the generation before the fence: %v, want ErrFenced", err)
	}
	if err := write(b, now, "inv_now", nil); err != nil {
		t.Fatalf("a write of the fence's generation: %v", err)
	}
	if err := write(a, readmodel.Fence{Firm: "frm_a", Name: "con_1", Generation: 3}, "inv_newer", nil); err != nil {
		t.Fatalf("a write of a newer generation: %v", err)
	}
	if err := write(a, readmodel.Fence{Firm: "frm_a", Name: "con_2", Generation: 1}, "inv_other_name", nil); err != nil {
		t.Fatalf("a write under another fence: %v", err)
	}
	if err := write(a, readmodel.Fence{Firm: "frm_b", Name: "con_1", Generation: 1}, "inv_other_firm", nil); err != nil {
		t.Fatalf("a write of another firm: %v", err)
	}
	got := modelOf(t, b, "frm_a")
	for _, id := range []string{"inv_before", "inv_now", "inv_newer", "inv_other_name"} {
		if _, ok := got["invoices/"+id]; !ok {
			t.Errorf("%s not written: %v", id, got)
		}
	}
	for _, id := range []string{"inv_stale", "inv_stale_after"} {
		if _, ok := got["invoices/"+id]; ok {
			t.Errorf("%s written past its fence", id)
		}
	}

	const lease, name = "sync/frm_a/ledger", "sync/frm_a/ledger"
	if ok, err := a.Lease(ctx, lease, "inst-1", time.Minute); err != nil || !ok {
		t.Fatalf("leasing: %t, %v", ok, err)
	}
	if ok, err := a.SaveFencedCheckpoint(ctx, old, name, []byte(`{"stale":true}`), lease, "inst-1"); ok || !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("a checkpoint of the generation before the fence: %t, %v; want ErrFenced", ok, err)
	}
	if got, _ := b.Checkpoint(ctx, name); got != nil {
		t.Fatalf("a fenced checkpoint was saved: %q", got)
	}
	if ok, err := a.SaveFencedCheckpoint(ctx, now, name, []byte(`{"now":true}`), lease, "inst-1"); !ok || err != nil {
		t.Fatalf("a checkpoint of the fence's generation under the lease: %t, %v", ok, err)
	}
	if ok, err := b.SaveFencedCheckpoint(ctx, now, name, []byte(`{"other":true}`), lease, "inst-2"); ok || err != nil {
		t.Fatalf("a checkpoint of the fence's generation without the lease: %t, %v; want not saved", ok, err)
	}
	if got, _ := b.Checkpoint(ctx, name); string(got) != `{"now":true}` {
		t.Fatalf("checkpoint %q", got)
	}
}
