package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/gcra"
	"github.com/practicegw/practicegw/internal/redistest"
)

// Ten a second with a burst of ten, and two a second, in microseconds.
var (
	tenPerSecond = gcra.Cell{Interval: 100_000, Tolerance: 1_000_000}
	twoPerSecond = gcra.Cell{Interval: 500_000, Tolerance: 1_000_000}
)

type request struct {
	id      string
	cell    gcra.Cell
	consume bool
	now     int64
}

func batchOf(reqs ...request) *RateBatch {
	b := NewRateBatch()
	for _, r := range reqs {
		b.Add(r.id, r.cell, r.consume, r.now)
	}
	b.encodeArgs()
	return b
}

// rateLimitsOn is RateLimits on a Redis of its own.
func rateLimitsOn(t *testing.T) *RateLimits {
	t.Helper()
	rdb, err := NewClient(redistest.Start(t).URL(), TLSFiles{}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return NewRateLimits(rdb)
}

// TestEncodeBatch checks the script call a batch becomes: each
// credential's keys once, in order of first appearance, and six arguments
// a group pointing at them, with the group's size.
func TestEncodeBatch(t *testing.T) {
	b := batchOf(
		request{id: "crd_b", cell: tenPerSecond, consume: true},
		request{id: "crd_a", cell: twoPerSecond, now: 1700000000000000},
		request{id: "crd_b", cell: tenPerSecond, consume: true},
		request{id: "crd_b", cell: tenPerSecond},
	)
	wantKeys := []string{"pgw:rl:{crd_b}", "pgw:usage:{crd_b}", "pgw:rl:{crd_a}", "pgw:usage:{crd_a}"}
	if !slices.Equal(b.keys, wantKeys) {
		t.Fatalf("keys %q, want %q", b.keys, wantKeys)
	}
	wantArgs := []any{strconv.Itoa(8 * 24),
		int64(1), int64(100000), int64(1000000), int64(1), int64(0), int64(2),
		int64(2), int64(500000), int64(1000000), int64(0), int64(1700000000000000), int64(1),
		int64(1), int64(100000), int64(1000000), int64(0), int64(0), int64(1),
	}
	if !slices.Equal(b.args, wantArgs) {
		t.Fatalf("args\n%v\nwant\n%v", b.args, wantArgs)
	}
	if !slices.Equal(b.callGroup, []int{0, 1, 0, 2}) {
		t.Fatalf("requests' groups %v, want [0 1 0 2]", b.callGroup)
	}
	b.Reset()
	b.Add("crd_c", tenPerSecond, true, 0)
	b.encodeArgs()
	if !slices.Equal(b.keys, []string{"pgw:rl:{crd_c}", "pgw:usage:{crd_c}"}) || len(b.args) != 7 {
		t.Fatalf("after Reset: keys %q, args %v", b.keys, b.args)
	}
}

// TestDecodeBatch feeds the reply reader what the script may answer for a
// batch of two requests of one credential, and what it should not.
func TestDecodeBatch(t *testing.T) {
	allowed := gcra.Result{Allowed: true, Remaining: 0, Reset: 1_000_000}
	refused := gcra.Result{Reset: 1_000_000, RetryAfter: 100_000}
	for _, tt := range []struct {
		name  string
		reply any
		want  []gcra.Result
		err   string // "" none; else a substring
	}{
		// Booked to 900ms ahead: room for one more.
		{"one of two", []any{int64(900000), int64(1)}, []gcra.Result{allowed, refused}, ""},
		{"half a group", []any{int64(900000)}, nil, "answered"},
		{"not an array", int64(1), nil, "answered"},
		{"string element", []any{"9", int64(1)}, nil, "answered"},
		{"more admitted than asked", []any{int64(0), int64(3)}, nil, "answered"},
		{"TAT behind now", []any{int64(-1), int64(0)}, nil, "answered"},
		// An empty bucket admits both; Redis says it admitted one.
		{"disagreement", []any{int64(0), int64(1)}, nil, "disagree"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := request{id: "crd_a", cell: tenPerSecond, consume: true}
			got, err := batchOf(r, r).decode(tt.reply)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one saying %q", err, tt.err)
			}
			if err != nil {
				got = nil
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("results %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzDecodeBatch decodes arbitrary integer arrays as the reply for three
// requests in two groups: no panic, and results only from an array of
// four integers in range.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(int64(900000), int64(1), int64(0), int64(0), uint8(4))
	f.Add(int64(-1), int64(99), int64(0), int64(0), uint8(3))
	f.Fuzz(func(t *testing.T, a, b, c, d int64, n uint8) {
		reply := []any{a, b, c, d}[:min(int(n), 4)]
		got, err := batchOf(request{id: "crd_a", cell: tenPerSecond, consume: true},
			request{id: "crd_b", cell: tenPerSecond}, request{id: "crd_a", cell: tenPerSecond, consume: true}).decode(reply)
		if err != nil && got != nil {
			t.Fatalf("results %+v with error %v", got, err)
		}
		if err == nil && (len(got) != 3 || len(reply) != 4) {
			t.Fatalf("results %+v from %v", got, reply)
		}
	})
}

// TestBatchMatchesGCRA sends random batches, mixing credentials, rates,
// peeks and pinned clocks that sometimes run backwards, and batches of one
// busy credential, as single script calls: each request's result must be
// the one internal/gcra gives when the batch's requests are decided one by
// one, group by group, or instances with and without Redis would enforce
// different limits.
func TestBatchMatchesGCRA(t *testing.T) {
	limits := rateLimitsOn(t)
	ctx := context.Background()
	b := NewRateBatch()

	cells := []gcra.Cell{tenPerSecond, {Interval: 333_333, Tolerance: 666_666}, {Interval: 8_571_428, Tolerance: 8_571_428}}
	rng := rand.New(rand.NewPCG(3, 5))
	tats := map[string]int64{}
	decide := func(r request) gcra.Result {
		var res gcra.Result
		if r.consume {
			tats[r.id], res = r.cell.Step(tats[r.id], r.now)
		} else {
			res = r.cell.Peek(tats[r.id], r.now)
		}
		return res
	}
	now := time.Now().UnixMicro()
	for batch := range 200 {
		reqs := make([]request, 1+rng.IntN(12))
		for i := range reqs {
			if batch%4 == 0 {
				// One group: a busy credential's requests, some refused.
				reqs[i] = request{id: "crd_b0", cell: cells[1], consume: true, now: now}
				continue
			}
			switch rng.IntN(4) {
			case 0:
				now += rng.Int64N(300_000)
			case 1:
				now -= rng.Int64N(50_000)
			}
			reqs[i] = request{id: fmt.Sprintf("crd_b%d", rng.IntN(3)), cell: cells[rng.IntN(len(cells))],
				consume: rng.IntN(5) != 0, now: now}
		}
		if batch%4 == 0 {
			now += rng.Int64N(1_000_000)
		}
		b.Reset()
		for _, r := range reqs {
			b.Add(r.id, r.cell, r.consume, r.now)
		}
		// The script decides group by group, in order of each group's
		// first request.
		order := make([]int, len(reqs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int { return b.callGroup[x] - b.callGroup[y] })
		want := make([]gcra.Result, len(reqs))
		for _, i := range order {
			want[i] = decide(reqs[i])
		}
		got, err := limits.Decide(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range reqs {
			if got[i] != want[i] {
				t.Fatalf("batch %d, request %d of %d (%s, consume %v): script %+v, Go %+v",
					batch, i+1, len(reqs), reqs[i].id, reqs[i].consume, got[i], want[i])
			}
		}
	}
}

// TestBatchCountsUsage: booked requests are counted per hour, admitted and
// refused; peeks are not.
func TestBatchCountsUsage(t *testing.T) {
	limits := rateLimitsOn(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	b := NewRateBatch()
	for range 3 {
		b.Add("crd_u", twoPerSecond, true, now.UnixMicro())
	}
	b.Add("crd_u", twoPerSecond, false, now.UnixMicro())
	if _, err := limits.Decide(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := limits.Usage(ctx, "crd_u", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Admitted != 2 || got[0].Refused != 1 || !got[0].Hour.Equal(now.Truncate(time.Hour)) {
		t.Fatalf("usage %+v, want 2 admitted and 1 refused in the hour", got)
	}
}
