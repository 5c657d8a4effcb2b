package readmodel

import (
	"cmp"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// With a bound on the memory read models may take, each firm's model is
// held by a few of the live instances (its holders) and the others send
// its requests to one of them. Every instance computes the same placement
// from the same membership, so no instance assigns firms to the others:
// each takes what the placement gives it and lets go of the rest once its
// new holders have it (the gateway's hand-over).

// Member is one live instance as the others see it.
type Member struct {
	// ID names the instance (its sync lease holder).
	ID string `json:"id"`
	// Advertise is where the other instances reach it.
	Advertise string `json:"advertise"`
	// Memory is the most its read models may take, in bytes; 0 is no
	// bound.
	Memory int64 `json:"memory"`
	// Holds are the firms whose models it has loaded and serves, which
	// the others may send their requests to.
	Holds []string `json:"holds,omitempty"`
	// Sizes are the bytes of each firm it holds (Model.Size), what the
	// placement counts a firm at.
	Sizes map[string]int64 `json:"sizes,omitempty"`
	// Until is when its heartbeat expires, in the store's clock
	// (milliseconds since the epoch).
	Until int64 `json:"until,omitempty"`
}

// Placement is which members hold which firm.
type Placement struct {
	// Holders are each firm's holders, best first.
	Holders map[string][]string
	// Short are the firms with fewer holders than asked: the members'
	// bounds cannot take them as often. They are still answered, from the
	// shared store.
	Short []string
}

// Place gives each firm up to replicas holders among members: the members
// it ranks highest by rendezvous hashing (so a member joining or leaving
// moves about 1/N of the firms) that still have room for it under their
// bound. Firms are placed largest first, which packs the bounds best, and
// a firm of unknown size (never loaded) counts as the mean of the known
// ones, or, when none is known (every instance started at once), as an
// even share of the bounds. The answer depends only on its arguments,
// never on their order.
func Place(members []Member, firms []string, sizes map[string]int64, replicas int) Placement {
	p := Placement{Holders: make(map[string][]string, len(firms))}
	if replicas < 1 {
		replicas = 1
	}
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	ms = slices.CompactFunc(ms, func(a, b Member) bool { return a.ID == b.ID })
	free := make(map[string]int64, len(ms))
	for _, m := range ms {
		free[m.ID] = m.Memory
	}
	order := slices.Clone(firms)
	slices.Sort(order)
	order = slices.Compact(order)
	size := sizer(sizes, ms, len(order)*replicas+len(ms)*replicas)
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(size(b), size(a)) })
	for _, firm := range order {
		need := size(firm)
		var holders []string
		for _, m := range rank(firm, ms) {
			if len(holders) == replicas {
				break
			}
			if m.Memory > 0 {
				if free[m.ID] < need {
					continue
				}
				free[m.ID] -= need
			}
			holders = append(holders, m.ID)
		}
		p.Holders[firm] = holders
		if len(holders) < min(replicas, len(ms)) || len(ms) == 0 {
			p.Short = append(p.Short, firm)
		}
	}
	slices.Sort(p.Short)
	return p
}

// sizer counts a firm at its known size, else at the mean of the known.
// With none known, a firm counts as an even share of the bounds among the
// holdings asked for and replicas more per member: the first placement
// then gives no member more than replicas firms past its share of them
// (rendezvous alone may give one member most of them, which it would load
// before any size is known), and the bounds keep room for every firm's
// last holders to be distinct members. Without a bound on every member
// nothing needs counting.
func sizer(sizes map[string]int64, ms []Member, holdings int) func(string) int64 {
	var sum, n int64
	for _, b := range sizes {
		sum, n = sum+b, n+1
	}
	mean := int64(0)
	if n > 0 {
		mean = sum / n
	} else if room := boundsOf(ms); room > 0 && holdings > 0 {
		mean = room / int64(holdings)
	}
	return func(firm string) int64 {
		if b, ok := sizes[firm]; ok {
			return b
		}
		return mean
	}
}

// boundsOf is the members' bounds together; 0 when any has none.
func boundsOf(ms []Member) int64 {
	var room int64
	for _, m := range ms {
		if m.Memory <= 0 {
			return 0
		}
		room += m.Memory
	}
	return room
}

// rank orders members by their rendezvous weight for firm, highest first.
func rank(firm string, ms []Member) []Member {
	type scored struct {
		m Member
		w uint64
	}
	s := make([]scored, len(ms))
	for i, m := range ms {
		s[i] = scored{m, weight(firm, m.ID)}
	}
	slices.SortFunc(s, func(a, b scored) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.m.ID, b.m.ID)
	})
	out := make([]Member, len(s))
	for i := range s {
		out[i] = s[i].m
	}
	return out
}

// weight is firm's rendezvous weight on member: a hash of both, the
// same in every process.
func weight(firm, member string) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(firm)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(member)
	return d.Sum64()
}

// HoldersOf are the members that hold firm now (its Holds), in the order
// the placement prefers them: a request goes to one of these.
func HoldersOf(firm string, members []Member) []string {
	var out []string
	for _, m := range rank(firm, members) {
		if slices.Contains(m.Holds, firm) {
			out = append(out, m.ID)
		}
	}
	return out
}
