package recordindex_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice/recordindex"
)

// documents makes n document entries with random ids, as a document
// store's backfill gives them, and the same entries sorted by id.
func documents(b *testing.B, n int) (random, sorted []recordindex.Entry) {
	r := rand.New(rand.NewPCG(uint64(n), 9))
	for range n {
		id := fmt.Sprintf("doc_%016x", r.Uint64())
		raw, _ := json.Marshal(map[string]any{"id": id, "client": fmt.Sprintf("cli_%d", r.IntN(400)),
			"status": "filed", "updated_at": "2026-03-02T09:00:00Z"})
		e, err := recordindex.NewEntry(raw)
		if err != nil {
			b.Fatal(err)
		}
		random = append(random, e)
	}
	return random, recordindex.Sorted(append([]recordindex.Entry(nil), random...))
}

func insertAll(entries []recordindex.Entry) time.Duration {
	start := time.Now()
	x := recordindex.NewIndex(nil)
	for _, e := range entries {
		x.Upsert(e)
	}
	return time.Since(start)
}

// BenchmarkIndexRandomOrderInserts prints how long a backfill of 50k,
// 100k and 200k documents arriving in random id order takes to index, and
// its ratio to the same records arriving sorted, measured in the same run:
// a ratio that stays flat as n doubles is n log n, one that doubles is the
// quadratic insert this index replaced.
//
//	go test -run=^$ -bench=IndexRandomOrderInserts -benchtime=1x ./practice/recordindex/
func BenchmarkIndexRandomOrderInserts(b *testing.B) {
	for _, n := range []int{50_000, 100_000, 200_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			random, sorted := documents(b, n)
			var tr, ts time.Duration
			for b.Loop() {
				tr += insertAll(random)
				ts += insertAll(sorted)
			}
			b.ReportMetric(float64(tr.Milliseconds())/float64(b.N), "random-ms")
			b.ReportMetric(float64(tr)/float64(ts), "random/sorted")
			b.Logf("%d documents: random order %v, sorted %v, ratio %.2f", n, tr/time.Duration(b.N), ts/time.Duration(b.N), float64(tr)/float64(ts))
		})
	}
}
