package readmodel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func members(n int, memory int64) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = Member{ID: fmt.Sprintf("gw-%d", i), Memory: memory}
	}
	return out
}

func firmIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("frm_%03d", i)
	}
	return out
}

// Every instance computes the same placement whatever order it read the
// membership and the firms in.
func TestPlaceIsTheSameEverywhere(t *testing.T) {
	ms, firms := members(5, 0), firmIDs(40)
	want := Place(ms, firms, nil, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		m2, f2 := slices.Clone(ms), slices.Clone(firms)
		rng.Shuffle(len(m2), func(i, j int) { m2[i], m2[j] = m2[j], m2[i] })
		rng.Shuffle(len(f2), func(i, j int) { f2[i], f2[j] = f2[j], f2[i] })
		got := Place(m2, f2, nil, 2)
		for _, f := range firms {
			if !slices.Equal(got.Holders[f], want.Holders[f]) {
				t.Fatalf("%s: %v here, %v there", f, got.Holders[f], want.Holders[f])
			}
		}
	}
	for _, f := range firms {
		if h := want.Holders[f]; len(h) != 2 || h[0] == h[1] {
			t.Fatalf("%s held by %v, want two instances", f, h)
		}
	}
}

// A member joining takes about 1/N of the holdings and moves nothing
// between the others; one leaving moves only its own.
func TestPlaceMovesOnlyWhatItMust(t *testing.T) {
	firms := firmIDs(400)
	before := Place(members(4, 0), firms, nil, 2)
	after := Place(members(5, 0), firms, nil, 2)
	moved := 0
	for _, f := range firms {
		for _, id := range after.Holders[f] {
			if !slices.Contains(before.Holders[f], id) {
				moved++
				if id != "gw-4" {
					t.Fatalf("%s moved to %s, which was there before", f, id)
				}
			}
		}
	}
	// 800 holdings over 5 members: the new one takes about 160.
	if moved < 120 || moved > 200 {
		t.Fatalf("a fifth member took %d of 800 holdings, want about 160", moved)
	}
	gone := Place(members(4, 0)[:3], firms, nil, 2)
	for _, f := range firms {
		for _, id := range before.Holders[f] {
			if id != "gw-3" && !slices.Contains(gone.Holders[f], id) {
				t.Fatalf("%s left %s when gw-3 left", f, id)
			}
		}
	}
}

// No member is given more than its bound; what the bounds cannot hold
// replicas times is short.
func TestPlaceKeepsTheBounds(t *testing.T) {
	firms := firmIDs(30)
	sizes := map[string]int64{}
	for i, f := range firms {
		sizes[f] = int64(100 + 10*i)
	}
	bound := int64(3000)
	p := Place(members(3, bound), firms, sizes, 2)
	load := map[string]int64{}
	for _, f := range firms {
		for _, id := range p.Holders[f] {
			load[id] += sizes[f]
		}
	}
	for id, b := range load {
		if b > bound {
			t.Fatalf("%s holds %d bytes, bound %d", id, b, bound)
		}
	}
	// 30 firms of 100..390 bytes twice is 14,700 bytes; three bounds of
	// 3,000 hold at most 9,000.
	if len(p.Short) == 0 {
		t.Fatal("nothing short though the bounds cannot hold every firm twice")
	}
	for _, f := range p.Short {
		if len(p.Holders[f]) >= 2 {
			t.Fatalf("%s is short but held by %v", f, p.Holders[f])
		}
	}
	ample := Place(members(3, 1<<20), firms, sizes, 2)
	if len(ample.Short) != 0 {
		t.Fatalf("short %v with room for all", ample.Short)
	}
}

// A firm never loaded counts as the mean of those known, so a new firm is
// placed as if it were an ordinary one.
func TestPlaceCountsUnknownFirmsAtTheMean(t *testing.T) {
	sizes := map[string]int64{"frm_a": 1000, "frm_b": 3000}
	p := Place(members(1, 4000), []string{"frm_a", "frm_b", "frm_new"}, sizes, 1)
	// frm_b (3000) first, then frm_new at the mean (2000) does not fit,
	// then frm_a (1000) does.
	if len(p.Holders["frm_b"]) != 1 || len(p.Holders["frm_a"]) != 1 || len(p.Holders["frm_new"]) != 0 {
		t.Fatalf("placement %v", p.Holders)
	}
	if !slices.Equal(p.Short, []string{"frm_new"}) {
		t.Fatalf("short %v, want frm_new", p.Short)
	}
}

func TestHoldersOfAreThoseThatHoldIt(t *testing.T) {
	ms := members(3, 0)
	ms[0].Holds = []string{"frm_a"}
	ms[2].Holds = []string{"frm_a", "frm_b"}
	got := HoldersOf("frm_a", ms)
	slices.Sort(got)
	if !slices.Equal(got, []string{"gw-0", "gw-2"}) {
		t.Fatalf("holders of frm_a: %v", got)
	}
	if got := HoldersOf("frm_c", ms); len(got) != 0 {
		t.Fatalf("holders of frm_c: %v", got)
	}
}

// Instances started at once know no firm's size yet: their first
// placement gives none more than replicas firms past its share, rather
// than rendezvous alone (which gives one member most of the firms for some
// seeds, loaded before any size is known), holds every firm at least once,
// and leaves few short (held fewer than replicas times for the round
// until their sizes are known).
func TestPlaceWithNoSizeKnownKeepsToTheShares(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n, replicas := 2+rng.IntN(4), 1+rng.IntN(2)
		firms := make([]string, 5+rng.IntN(40))
		for i := range firms {
			firms[i] = fmt.Sprintf("frm_%d_%d", seed, i)
		}
		ms := members(n, 0)
		for i := range ms {
			ms[i].ID = fmt.Sprintf("gw-%d-%d", seed, i)
		}
		// Bounds of 1.2 times a share of firms of 7 MB each, as an
		// operator sets them.
		share := int64(len(firms)*replicas) * 7 << 20 / int64(n)
		for i := range ms {
			ms[i].Memory = share * 12 / 10
		}
		p := Place(ms, firms, nil, replicas)
		count := map[string]int{}
		for _, f := range firms {
			for _, id := range p.Holders[f] {
				count[id]++
			}
		}
		most := (len(firms)*replicas+n-1)/n + replicas
		for id, c := range count {
			if c > most {
				t.Fatalf("seed %d: %s given %d of %d firms x %d on %d members, more than the %d of its share and replicas",
					seed, id, c, len(firms), replicas, n, most)
			}
		}
		for _, f := range firms {
			if len(p.Holders[f]) == 0 {
				t.Fatalf("seed %d: %s held by nobody with room for every firm", seed, f)
			}
		}
		if len(p.Short)*replicas > n*replicas {
			t.Fatalf("seed %d: %d of %d firms short with room for every one", seed, len(p.Short), len(firms))
		}
	}
}
