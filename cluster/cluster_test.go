package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// members is the membership in memory, as the shared store keeps it: a
// heartbeat lapses after its ttl by the test's clock.
type members struct {
	mu  sync.Mutex
	now time.Time
	m   map[string]readmodel.Member
}

func (s *members) Heartbeat(_ context.Context, m readmodel.Member, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.Until = s.now.Add(ttl).UnixMilli()
	s.m[m.ID] = m
	return nil
}

func (s *members) Members(context.Context) ([]readmodel.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []readmodel.Member
	for _, m := range s.m {
		if m.Until > s.now.UnixMilli() {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b readmodel.Member) int { return cmpString(a.ID, b.ID) })
	return out, nil
}

func (s *members) Leave(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// firms is one instance's runtime as the cluster sees it: what it holds,
// each firm a fixed size; a load fails while failing is set.
type firms struct {
	all     []string
	mu      sync.Mutex
	held    map[string]bool
	failing bool
	// released is told of each firm let go, before it is.
	released func(firm string)
}

func (f *firms) Placed() []string { return f.all }

func (f *firms) Size(string) readmodel.Size { return readmodel.Size{Records: 10, Bytes: 100 << 20} }

func (f *firms) Hold(_ context.Context, firm string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing {
		return fmt.Errorf("the store does not answer")
	}
	f.held[firm] = true
	return nil
}

func (f *firms) Release(firm string) {
	if f.released != nil {
		f.released(firm)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, firm)
}

func (f *firms) Holds(firm string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[firm]
}

func (f *firms) Held() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for firm := range f.held {
		out = append(out, firm)
	}
	slices.Sort(out)
	return out
}

func (f *firms) Idle(context.Context, string, bool) {}

func (f *firms) FromModel(string, practice.Kind) bool { return true }

// TestFirmsAreNeverHeldByNobodyWhileTheyMove: seeded interleavings of
// three instances' placement rounds, their heartbeats lapsing and their
// loads failing, instances stopping and starting again. An instance lets
// go of a firm only once another holds it, or when the placement it made
// gives the firm no holder at all (the bounds of the instances it hears
// cannot hold it: it is served from the store, and the bound is kept);
// and once every instance is heard and has taken its rounds, each firm is
// held exactly replicas times, within the bounds.
func TestFirmsAreNeverHeldByNobodyWhileTheyMove(t *testing.T) {
	all := []string{"frm_a", "frm_b", "frm_c", "frm_d", "frm_e", "frm_f"}
	const replicas = 2
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 40))
			store := &members{now: time.Unix(1_700_000_000, 0), m: map[string]readmodel.Member{}}
			type instance struct {
				c     *Cluster
				firms *firms
				up    bool
			}
			start := func(id string) *instance {
				f := &firms{all: all, held: map[string]bool{}}
				// Five firms' worth each: three instances hold every firm
				// twice, two of them cannot.
				c := New(Config{ID: id, Advertise: "http://" + id, Memory: 500 << 20, Replicas: replicas}, store, f, nil)
				c.Heartbeat(ctx)
				return &instance{c: c, firms: f, up: true}
			}
			insts := []*instance{start("gw0"), start("gw1"), start("gw2")}
			heldElsewhere := func(self *instance, firm string) bool {
				for _, in := range insts {
					if in != self && in.up && in.firms.Holds(firm) {
						return true
					}
				}
				return false
			}
			var step int
			watch := func(in *instance) {
				in.firms.released = func(firm string) {
					if !in.up {
						return // stopping: it leaves, and its firms with it
					}
					if !heldElsewhere(in, firm) && len(in.c.Placement().Holders[firm]) > 0 {
						t.Fatalf("step %d: %s let go of %s, which no other instance holds, placed on %v",
							step, in.c.self.ID, firm, in.c.Placement().Holders[firm])
					}
				}
			}
			for _, in := range insts {
				watch(in)
			}
			for step = range 60 {
				in := insts[rng.IntN(len(insts))]
				switch op := rng.IntN(10); {
				case op < 6 && in.up:
					in.firms.failing = rng.IntN(8) == 0
					in.c.Place(ctx)
				case op < 8:
					// Time passes: a heartbeat not renewed lapses.
					store.mu.Lock()
					store.now = store.now.Add(time.Duration(rng.IntN(3)) * time.Second)
					store.mu.Unlock()
					for _, other := range insts {
						if other.up && rng.IntN(4) != 0 {
							other.c.Heartbeat(ctx)
						}
					}
				case op == 8 && in.up && rng.IntN(3) == 0:
					// Stopped: it lets go of everything and leaves; what it
					// alone held is held by nobody until another loads it.
					in.up = false
					in.c.stop()
				case !in.up:
					*in = *start(in.c.self.ID)
					watch(in)
				}
			}
			// Everyone up and heard, loads succeeding: every instance takes
			// its rounds until the placement settles.
			for _, in := range insts {
				if !in.up {
					*in = *start(in.c.self.ID)
					watch(in)
				}
				in.firms.failing = false
				in.c.Heartbeat(ctx)
			}
			for range 4 {
				for _, in := range insts {
					in.c.Place(ctx)
				}
			}
			for _, firm := range all {
				n := 0
				for _, in := range insts {
					if in.firms.Holds(firm) {
						n++
					}
				}
				if n != replicas {
					t.Errorf("%s held by %d instances, want %d", firm, n, replicas)
				}
			}
			for _, in := range insts {
				if ok, detail := in.c.Check(); !ok || len(in.firms.Held()) > 5 {
					t.Errorf("%s: %s, holding %v", in.c.self.ID, detail, in.firms.Held())
				}
			}
		})
	}
}
