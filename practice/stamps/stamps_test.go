package stamps_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

var epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type job struct {
	Title string `json:"title"`
	Stage string `json:"stage"`
}

func of(t *testing.T, s *stamps.Store, content any, readAt time.Time) stamps.Stamp {
	t.Helper()
	st, err := s.Of(context.Background(), stamps.Read{Kind: practice.Jobs, ID: "job_1", Content: content, Began: readAt})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A record read again as it was keeps its stamp, on another instance and
// after a restart; a change is stamped later, and a change back is a
// change too.
func TestStampsMoveOnEveryChangeAndOnlyThen(t *testing.T) {
	state := changes.NewMemoryState()
	c := &clock{now: epoch}
	a := stamps.New(state, c, "karbon", "frm_acme")
	first := of(t, a, job{"Accounts", "planned"}, time.Time{})
	if !first.At.Equal(epoch) || !first.First.Equal(epoch) || first.Version() != epoch.UnixMilli() {
		t.Fatalf("first stamp %+v, want the time it was first read", first)
	}
	c.add(time.Hour)
	restarted := stamps.New(state, c, "karbon", "frm_acme")
	if again := of(t, restarted, job{"Accounts", "planned"}, time.Time{}); again != first {
		t.Fatalf("the same content read an hour later by another instance: %+v, want %+v", again, first)
	}
	moved := of(t, a, job{"Accounts", "in_progress"}, time.Time{})
	if moved.Version() <= first.Version() || !moved.At.Equal(epoch.Add(time.Hour)) || !moved.First.Equal(epoch) {
		t.Fatalf("a stage move: %+v after %+v", moved, first)
	}
	c.add(time.Minute)
	back := of(t, restarted, job{"Accounts", "planned"}, time.Time{})
	if back.Version() <= moved.Version() {
		t.Fatalf("changed back: version %d after %d; want it to rise", back.Version(), moved.Version())
	}
	if other := of(t, stamps.New(state, c, "xpm", "frm_acme"), job{"Accounts", "planned"}, time.Time{}); other.At.Equal(first.At) {
		t.Fatal("another system's stamp of the same id is the first system's")
	}
}

// A record's first stamp is after the version it carried before.
func TestAFirstStampIsAfterTheVersionBefore(t *testing.T) {
	s := stamps.New(changes.NewMemoryState(), &clock{now: epoch}, "karbon", "frm_acme")
	before := epoch.Add(30 * 24 * time.Hour) // a work item starting next month
	st, err := s.Of(context.Background(), stamps.Read{Kind: practice.Jobs, ID: "job_1", Content: job{"Accounts", "planned"}, After: before})
	if err != nil {
		t.Fatal(err)
	}
	if !st.At.After(before) {
		t.Fatalf("first stamp at %v, not after %v", st.At, before)
	}
}

// An instance whose clock is behind the one that stamped last still
// stamps after it.
func TestStampsRiseWhateverTheClock(t *testing.T) {
	state := changes.NewMemoryState()
	ahead, behind := &clock{now: epoch.Add(time.Minute)}, &clock{now: epoch}
	a, b := stamps.New(state, ahead, "karbon", "frm_acme"), stamps.New(state, behind, "karbon", "frm_acme")
	last := of(t, a, job{"Accounts", "planned"}, time.Time{})
	for i := range 5 {
		st := of(t, b, job{fmt.Sprintf("Accounts %d", i), "planned"}, time.Time{})
		if !st.At.After(last.At) {
			t.Fatalf("stamp %d at %v, not after %v", i, st.At, last.At)
		}
		last = st
	}
}

// A read begun before the read that made the saved stamp, seeing other
// content, is answered a version below the saved one, and saves nothing.
func TestAReadBegunBeforeTheStampIsOlder(t *testing.T) {
	state := changes.NewMemoryState()
	c := &clock{now: epoch}
	s := stamps.New(state, c, "karbon", "frm_acme")
	of(t, s, job{"Accounts", "planned"}, epoch)
	c.add(time.Second)
	newer := of(t, s, job{"Accounts", "in_progress"}, epoch.Add(time.Second))
	c.add(time.Second)
	stale := of(t, s, job{"Accounts", "planned"}, epoch.Add(500*time.Millisecond))
	if stale.Version() >= newer.Version() {
		t.Fatalf("a read begun before the stamp's: version %d, want below %d", stale.Version(), newer.Version())
	}
	if again := of(t, s, job{"Accounts", "in_progress"}, time.Time{}); again != newer {
		t.Fatalf("after the stale read the stamp is %+v, want %+v", again, newer)
	}
	later := of(t, s, job{"Accounts", "planned"}, epoch.Add(2*time.Second))
	if later.Version() <= newer.Version() {
		t.Fatalf("a read begun after: version %d, want above %d", later.Version(), newer.Version())
	}
}

// Gateways stamping the same change of a record at once, on two
// instances sharing the state store, answer one stamp.
func TestInstancesStampingAtOnceAgree(t *testing.T) {
	state := changes.NewMemoryState()
	clocks := []*clock{{now: epoch}, {now: epoch.Add(3 * time.Millisecond)}}
	insts := []*stamps.Store{stamps.New(state, clocks[0], "karbon", "frm_acme"), stamps.New(state, clocks[1], "karbon", "frm_acme")}
	var last int64
	for round := range 20 {
		content := job{fmt.Sprintf("Accounts %d", round%3), "planned"}
		got := make([]stamps.Stamp, 16)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range got {
			wg.Go(func() {
				<-start
				st, err := insts[i%2].Of(context.Background(), stamps.Read{Kind: practice.Jobs, ID: "job_1", Content: content})
				if err != nil {
					t.Error(err)
				}
				got[i] = st
			})
		}
		close(start)
		wg.Wait()
		for i, st := range got {
			if st != got[0] {
				t.Fatalf("round %d: reader %d has %+v, reader 0 %+v", round, i, st, got[0])
			}
		}
		if got[0].Version() <= last {
			t.Fatalf("round %d: version %d after %d", round, got[0].Version(), last)
		}
		last = got[0].Version()
		for _, c := range clocks {
			c.add(time.Duration(round%2) * time.Millisecond)
		}
	}
}

// scheduled is a state store that lets a seeded scheduler run other
// steps between a stamp's read and its save.
type scheduled struct {
	changes.StateStore
	between func()
}

func (s scheduled) Last(ctx context.Context, key string) ([]byte, error) {
	b, err := s.StateStore.Last(ctx, key)
	s.between()
	return b, err
}

func (s scheduled) Swap(ctx context.Context, key string, old, state []byte) (bool, error) {
	return changes.Swap(ctx, s.StateStore, key, old, state)
}

// Under every interleaving a seed picks (two instances with skewed
// clocks, restarted, reading the vendor's record while it changes, their
// answers arriving late, one stamping between the other's read and save),
// the record's saved stamp never goes back, a receiver that keeps the
// newest version never holds two contents under one version, and after
// the vendor goes quiet both instances answer one stamp, of the vendor's
// content, which the receiver then holds.
func TestStampsUnderSeededInterleavings(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		runInterleaving(t, seed)
	}
}

func runInterleaving(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 11))
	ctx := context.Background()
	mem := changes.NewMemoryState()
	now := epoch
	var vendor job
	vendor = job{"Accounts", "planned"}
	depth := 0
	var step func()
	state := scheduled{StateStore: mem, between: func() {
		if depth < 2 && r.IntN(2) == 0 {
			depth++
			step()
			depth--
		}
	}}
	skew := time.Duration(r.IntN(7)-3) * time.Millisecond
	clocks := []*clock{{now: now}, {now: now.Add(skew)}}
	open := func(i int) *stamps.Store { return stamps.New(state, clocks[i], "karbon", "frm_acme") }
	insts := []*stamps.Store{open(0), open(1)}
	var held struct {
		version int64
		digest  string
	}
	var saved time.Time
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	receive := func(st stamps.Stamp) {
		switch v := st.Version(); {
		case v > held.version:
			held.version, held.digest = v, st.Digest
		case v == held.version && st.Digest != held.digest:
			fail("version %d holds two contents", v)
		}
	}
	// busy is the instance stamping: in this process one read of a
	// record stamps at a time, so a step run in between uses the other.
	busy := [2]bool{}
	read := func(i int) {
		if busy[i] {
			return
		}
		readAt := clocks[i].Now()
		content := vendor
		state.between() // the answer arrives late
		if busy[i] {
			return
		}
		busy[i] = true
		defer func() { busy[i] = false }()
		st, err := insts[i].Of(ctx, stamps.Read{Kind: practice.Jobs, ID: "job_1", Content: content, Began: readAt})
		if err != nil {
			fail("%v", err)
		}
		receive(st)
	}
	step = func() {
		switch n := r.IntN(10); {
		case n < 3:
			vendor = job{[]string{"Accounts", "Payroll"}[r.IntN(2)], []string{"planned", "in_progress"}[r.IntN(2)]}
		case n < 7:
			read(r.IntN(2))
		case n < 9:
			d := time.Duration(r.IntN(3)) * time.Millisecond
			for _, c := range clocks {
				c.add(d)
			}
		default:
			i := r.IntN(2)
			insts[i] = open(i)
		}
		raw, _ := mem.Last(ctx, stamps.Prefix("karbon", "frm_acme", practice.Jobs)+"job_1")
		if raw != nil {
			var st stamps.Stamp
			if err := json.Unmarshal(raw, &st); err != nil {
				fail("%v", err)
			}
			if st.At.Before(saved) {
				fail("the saved stamp went back from %v to %v", saved, st.At)
			}
			saved = st.At
		}
	}
	for range 200 {
		step()
	}
	// Quiet: both instances read the vendor's record as it is now.
	for _, c := range clocks {
		c.add(time.Second)
	}
	depth = 2
	var final []stamps.Stamp
	for i := range insts {
		st, err := insts[i].Of(ctx, stamps.Read{Kind: practice.Jobs, ID: "job_1", Content: vendor, Began: clocks[i].Now()})
		if err != nil {
			fail("%v", err)
		}
		receive(st)
		final = append(final, st)
	}
	want, _ := stamps.Digest(vendor)
	if final[0] != final[1] || final[0].Digest != want {
		fail("after the quiet the instances answer %+v and %+v for %s", final[0], final[1], want)
	}
	if held.digest != want {
		fail("the receiver holds %s, the vendor has %s", held.digest, want)
	}
}

type invoice struct {
	Status string `json:"status"`
	Client string `json:"client"`
}

// A record whose vendor dates it keeps the vendor's time while that
// moves with the content; a change the vendor does not date (a client
// linked later) is stamped when first read, and a state the vendor dates
// before the one stamped is answered its own older time.
func TestVendorTimesStandWhileTheyMove(t *testing.T) {
	c := &clock{now: epoch.Add(time.Hour)}
	s := stamps.New(changes.NewMemoryState(), c, "xero", "frm_acme")
	ctx := context.Background()
	read := func(inv invoice, vendor time.Time) stamps.Stamp {
		t.Helper()
		st, err := s.Of(ctx, stamps.Read{Kind: practice.Invoices, ID: "inv_1", Content: inv, Vendor: vendor})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := read(invoice{"issued", ""}, epoch)
	if !first.At.Equal(epoch) {
		t.Fatalf("first stamp at %v, want the vendor's %v", first.At, epoch)
	}
	linked := read(invoice{"issued", "cli_1"}, epoch)
	if !linked.At.Equal(c.Now()) || linked.Version() <= first.Version() {
		t.Fatalf("a change the vendor does not date: %+v after %+v", linked, first)
	}
	c.add(time.Hour)
	paid := read(invoice{"paid", "cli_1"}, epoch.Add(90*time.Minute))
	if !paid.At.Equal(epoch.Add(90 * time.Minute)) {
		t.Fatalf("a change the vendor dates: %+v, want its time", paid)
	}
	if old := read(invoice{"issued", "cli_1"}, epoch); !old.At.Equal(epoch) {
		t.Fatalf("a state the vendor dates before: %+v, want its own time", old)
	}
	if again := read(invoice{"paid", "cli_1"}, epoch.Add(90*time.Minute)); again != paid {
		t.Fatalf("after the older state the stamp is %+v, want %+v", again, paid)
	}
}
