package linking

import (
	"context"
	"sync"

	"github.com/practicegw/practicegw/practice"
)

// Counts are the candidates one system asked its records system about,
// by the last answer for each: "12 of 340 Xero contacts match no Karbon
// client" is Missing 12 of Candidates 340.
type Counts struct {
	Candidates int `json:"candidates"`
	Linked     int `json:"linked"`
	Missing    int `json:"missing"`
	Ambiguous  int `json:"ambiguous"`
}

// maxTallied bounds the candidates a tally remembers; past it, new ones
// are not counted (the figures say at least).
const maxTallied = 200_000

// Tally counts the outcomes of one system's candidates, by Ref: asked
// again, a candidate counts by its newest answer.
type Tally struct {
	mu sync.Mutex
	m  map[string]Outcome
}

// Note records o as ref's outcome.
func (t *Tally) Note(ref string, o Outcome) {
	if ref == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]Outcome{}
	}
	if _, ok := t.m[ref]; !ok && len(t.m) >= maxTallied {
		return
	}
	t.m[ref] = o
}

// Counts are the tally's figures now.
func (t *Tally) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := Counts{Candidates: len(t.m)}
	for _, o := range t.m {
		switch o {
		case Linked:
			c.Linked++
		case Missing:
			c.Missing++
		case Ambiguous:
			c.Ambiguous++
		}
	}
	return c
}

// Unlinked are the refs whose last answer linked nothing.
func (t *Tally) Unlinked() int {
	c := t.Counts()
	return c.Missing + c.Ambiguous
}

// Counted is a Linker that notes each answer in Tally.
type Counted struct {
	Linker Linker
	Tally  *Tally
}

// A link left for later is not an answer: the candidate counts once the
// records system answers for it.
func (c Counted) LinkClient(ctx context.Context, t practice.Tenant, cand Candidate) (Link, error) {
	l, err := c.Linker.LinkClient(ctx, t, cand)
	if err == nil && l.Outcome != Later {
		c.Tally.Note(cand.Ref, l.Outcome)
	}
	return l, err
}
