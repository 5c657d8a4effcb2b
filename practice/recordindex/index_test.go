package recordindex_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordindex"
)

func entry(t *testing.T, r *rand.Rand, id string) recordindex.Entry {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{
		"id": id, "owner": fmt.Sprintf("usr_%d", r.IntN(5)), "stage": practice.JobStages[r.IntN(4)],
		"client": fmt.Sprintf("cli_%d", r.IntN(40)), "status": practice.ClientStatuses[r.IntN(3)],
		"deadline": fmt.Sprintf("2026-%02d-01", 1+r.IntN(12)), "updated_at": "2026-03-02T09:00:00Z",
	})
	e, err := recordindex.NewEntry(raw)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// pages reads every page of q with limit from page.
func pages(page func(practice.Query, int) practice.Page, f practice.Filter, limit int) []string {
	var ids []string
	q := practice.Query{Filter: f}
	for {
		p := page(q, limit)
		for _, raw := range p.Items {
			var v struct{ ID string }
			_ = json.Unmarshal(raw, &v)
			ids = append(ids, v.ID)
		}
		if !p.HasMore {
			return ids
		}
		q.Cursor = p.Next
	}
}

// An index answers every filtered page as the plain collection does,
// through upserts that change the indexed fields and removals.
func TestIndexPagesAsTheCollectionDoes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var entries []recordindex.Entry
	for i := range 2000 {
		entries = append(entries, entry(t, r, fmt.Sprintf("job_%05d", i)))
	}
	col := recordindex.Sorted(slices.Clone(entries))
	x := recordindex.NewIndex(recordindex.Sorted(entries))

	filters := []practice.Filter{
		{}, {Owner: "usr_1"}, {Stage: "in_progress"}, {Client: "cli_7"}, {Status: "active"},
		{Owner: "usr_2", Stage: "planned"}, {Client: "cli_3", Owner: "usr_4"}, {Stage: "awaiting_client", DeadlineBefore: "2026-06-01"},
		{Owner: "usr_none"}, {Stage: "in_progress", Owner: "usr_0", Client: "cli_12"},
	}
	check := func(round int) {
		t.Helper()
		for _, f := range filters {
			for _, limit := range []int{1, 7, 50, 200} {
				want, got := pages(col.Page, f, limit), pages(x.Page, f, limit)
				if !slices.Equal(want, got) {
					t.Fatalf("round %d, filter %+v, limit %d: the index pages %d records, the collection %d", round, f, limit, len(got), len(want))
				}
			}
		}
		if x.Len() != len(col) {
			t.Fatalf("round %d: %d indexed, %d in the collection", round, x.Len(), len(col))
		}
	}
	check(0)
	for round := 1; round <= 5; round++ {
		for range 300 {
			id := fmt.Sprintf("job_%05d", r.IntN(2500))
			if r.IntN(4) == 0 {
				if col.Remove(id) != x.Remove(id) {
					t.Fatalf("removing %s: the two disagree", id)
				}
				continue
			}
			e := entry(t, r, id)
			col.Upsert(e)
			x.Upsert(e)
		}
		check(round)
	}
}

// A filtered page of a large index reads candidates, not the collection.
func BenchmarkFilteredPage(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var entries []recordindex.Entry
	t := &testing.T{}
	for i := range 50000 {
		entries = append(entries, entry(t, r, fmt.Sprintf("job_%05d", i)))
	}
	col := recordindex.Sorted(slices.Clone(entries))
	x := recordindex.NewIndex(recordindex.Sorted(entries))
	q := practice.Query{Filter: practice.Filter{Stage: "in_progress", Owner: "usr_1", Client: "cli_7"}}
	b.Run("collection", func(b *testing.B) {
		for b.Loop() {
			col.Page(q, 50)
		}
	})
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			x.Page(q, 50)
		}
	})
}
