package storetest

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

// TombstoneBackend is a backend's tombstones: the read model's store and
// the retention sweep the gateway runs.
type TombstoneBackend interface {
	readmodel.TombstoneStore
	SweepTombstones(ctx context.Context, firm string, before time.Time) (int, error)
}

func tomb(k practice.Kind, id string, at time.Time, version int64) practice.Tombstone {
	return practice.Tombstone{ID: id, Object: k.Singular(), Deleted: true, DeletedAt: at.UTC(), Version: version}
}

func listTombs(t *testing.T, s readmodel.TombstoneStore, firm string, k practice.Kind, q practice.TombstoneQuery) []practice.Tombstone {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 1000
	}
	got, err := s.Tombstones(ctx, firm, k, q)
	if err != nil {
		t.Fatalf("listing %s's %s tombstones: %v", firm, k, err)
	}
	if len(got) > q.Limit {
		t.Fatalf("%d tombstones for a limit of %d", len(got), q.Limit)
	}
	return got
}

func tombIDs(ts []practice.Tombstone) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

func putTombs(t *testing.T, s readmodel.TombstoneStore, firm string, k practice.Kind, ts ...practice.Tombstone) {
	t.Helper()
	if err := s.PutTombstones(ctx, firm, k, ts); err != nil {
		t.Fatalf("keeping tombstones: %v", err)
	}
}

// Tombstones checks a readmodel.TombstoneStore and its sweep: what is put
// is listed back whole from another handle, in id order, after an id and
// from a time as a collection page is; putting again replaces; a dropped
// id is gone; firms and kinds are apart; the sweep removes exactly what
// was deleted before its time; and concurrent writers through two handles
// leave what they wrote. open returns an empty store and a second handle
// on the same state.
func Tombstones(t *testing.T, open func(t *testing.T) (store, other TombstoneBackend)) {
	st, other := open(t)
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(minutes int) time.Time {
		return base.Add(time.Duration(minutes) * time.Minute).Add(123 * time.Millisecond)
	}
	if got := listTombs(t, other, "frm_a", practice.Clients, practice.TombstoneQuery{}); len(got) != 0 {
		t.Fatalf("an empty store lists %v", got)
	}

	putTombs(t, st, "frm_a", practice.Clients, tomb(practice.Clients, "cli_3", at(3), 4), tomb(practice.Clients, "cli_1", at(1), 2))
	putTombs(t, st, "frm_a", practice.Clients, tomb(practice.Clients, "cli_2", at(2), 9))
	putTombs(t, st, "frm_a", practice.Jobs, tomb(practice.Jobs, "job_1", at(1), 1))
	putTombs(t, st, "frm_b", practice.Clients, tomb(practice.Clients, "cli_1", at(5), 7))
	want := []practice.Tombstone{tomb(practice.Clients, "cli_1", at(1), 2), tomb(practice.Clients, "cli_2", at(2), 9), tomb(practice.Clients, "cli_3", at(3), 4)}
	got := listTombs(t, other, "frm_a", practice.Clients, practice.TombstoneQuery{})
	if !slices.EqualFunc(got, want, sameTomb) {
		t.Fatalf("tombstones listed:\n%v\nwant\n%v", got, want)
	}

	for _, tc := range []struct {
		q    practice.TombstoneQuery
		want []string
	}{
		{practice.TombstoneQuery{Limit: 2}, []string{"cli_1", "cli_2"}},
		{practice.TombstoneQuery{After: "cli_2", Limit: 2}, []string{"cli_3"}},
		{practice.TombstoneQuery{After: "cli_15"}, []string{"cli_2", "cli_3"}}, // an id with no tombstone
		{practice.TombstoneQuery{After: "cli_3"}, []string{}},
		{practice.TombstoneQuery{Since: at(2)}, []string{"cli_2", "cli_3"}}, // since is inclusive
		{practice.TombstoneQuery{Since: at(2).Add(time.Millisecond)}, []string{"cli_3"}},
		{practice.TombstoneQuery{Since: at(1), After: "cli_1", Limit: 1}, []string{"cli_2"}},
	} {
		if got := tombIDs(listTombs(t, other, "frm_a", practice.Clients, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("%+v lists %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := tombIDs(listTombs(t, other, "frm_a", practice.Jobs, practice.TombstoneQuery{})); !slices.Equal(got, []string{"job_1"}) {
		t.Errorf("frm_a's jobs: %v", got)
	}
	if got := listTombs(t, other, "frm_b", practice.Clients, practice.TombstoneQuery{}); len(got) != 1 || !sameTomb(got[0], tomb(practice.Clients, "cli_1", at(5), 7)) {
		t.Errorf("frm_b's clients: %v", got)
	}

	// Removed again later: the newer tombstone replaces the older.
	putTombs(t, other, "frm_a", practice.Clients, tomb(practice.Clients, "cli_1", at(10), 5))
	if got := listTombs(t, st, "frm_a", practice.Clients, practice.TombstoneQuery{Since: at(4)}); len(got) != 1 || !sameTomb(got[0], tomb(practice.Clients, "cli_1", at(10), 5)) {
		t.Fatalf("after a second removal: %v", got)
	}
	// A record back: its tombstone goes; an id with none changes nothing.
	if err := other.DropTombstones(ctx, "frm_a", practice.Clients, []string{"cli_2", "cli_404"}); err != nil {
		t.Fatal(err)
	}
	if got := tombIDs(listTombs(t, st, "frm_a", practice.Clients, practice.TombstoneQuery{})); !slices.Equal(got, []string{"cli_1", "cli_3"}) {
		t.Fatalf("after dropping cli_2: %v", got)
	}
	if got := tombIDs(listTombs(t, st, "frm_b", practice.Clients, practice.TombstoneQuery{})); !slices.Equal(got, []string{"cli_1"}) {
		t.Fatalf("another firm's tombstones after a drop: %v", got)
	}

	// The sweep removes what was deleted before its time, in every kind
	// of the firm, and nothing of another firm.
	n, err := st.SweepTombstones(ctx, "frm_a", at(3))
	if err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want job_1 alone", n, err)
	}
	if got := tombIDs(listTombs(t, other, "frm_a", practice.Clients, practice.TombstoneQuery{})); !slices.Equal(got, []string{"cli_1", "cli_3"}) {
		t.Fatalf("clients after the sweep: %v", got)
	}
	if got := listTombs(t, other, "frm_a", practice.Jobs, practice.TombstoneQuery{}); len(got) != 0 {
		t.Fatalf("jobs after the sweep: %v", got)
	}
	if n, err := other.SweepTombstones(ctx, "frm_a", at(11)); err != nil || n != 2 {
		t.Fatalf("second sweep = %d, %v; want 2", n, err)
	}
	if got := listTombs(t, st, "frm_b", practice.Clients, practice.TombstoneQuery{}); len(got) != 1 {
		t.Fatalf("another firm's tombstones after a sweep: %v", got)
	}

	t.Run("many", func(t *testing.T) { tombstonesMany(t, st, other, base) })
}

// tombstonesMany pages a few hundred tombstones, most of them older than
// the listing's since and interleaved with it by id, and has writers on
// both handles put and drop them concurrently.
func tombstonesMany(t *testing.T, st, other TombstoneBackend, base time.Time) {
	const n = 300
	rnd := rand.New(rand.NewPCG(7, 11))
	var mu sync.Mutex
	want := map[string]practice.Tombstone{}
	var wg sync.WaitGroup
	for w, s := range []TombstoneBackend{st, other, st, other} {
		wg.Add(1)
		seed := rnd.Uint64()
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := w; i < n; i += 4 {
				id := fmt.Sprintf("doc_%04d", i)
				ts := tomb(practice.Documents, id, base.Add(time.Duration(r.IntN(100))*time.Minute), int64(i+1))
				if err := s.PutTombstones(ctx, "frm_m", practice.Documents, []practice.Tombstone{ts}); err != nil {
					t.Error(err)
					return
				}
				keep := r.IntN(5) > 0
				if !keep {
					if err := s.DropTombstones(ctx, "frm_m", practice.Documents, []string{id}); err != nil {
						t.Error(err)
						return
					}
				}
				mu.Lock()
				if keep {
					want[id] = ts
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	since := base.Add(90 * time.Minute)
	var wantIDs []string
	for id, ts := range want {
		if !ts.DeletedAt.Before(since) {
			wantIDs = append(wantIDs, id)
		}
	}
	slices.Sort(wantIDs)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		page := listTombs(t, other, "frm_m", practice.Documents, practice.TombstoneQuery{Since: since, After: after, Limit: 3})
		for _, ts := range page {
			if !sameTomb(ts, want[ts.ID]) {
				t.Fatalf("listed %v, want %v", ts, want[ts.ID])
			}
			got = append(got, ts.ID)
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(got, wantIDs) {
		t.Fatalf("paged %d tombstones since %s:\n%v\nwant %d:\n%v", len(got), since, got, len(wantIDs), wantIDs)
	}
}

func sameTomb(a, b practice.Tombstone) bool {
	return a.ID == b.ID && a.Object == b.Object && a.Deleted == b.Deleted && a.DeletedAt.Equal(b.DeletedAt) && a.Version == b.Version
}
