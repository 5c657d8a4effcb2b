package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// jobAt is a job at a version.
func jobAt(id string, version int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"job","title":"Accounts","client":"cli_1","owner":"usr_1","stage":"planned","closed_at":null,"created_at":"2026-03-02T09:00:00Z","updated_at":"2026-03-02T09:00:00Z","version":%d}`, id, version))
}

// tombInstance is one gateway's model of the firm over a shared Redis,
// keeping tombstones there.
func tombInstance(t *testing.T, url string) *readmodel.Model {
	t.Helper()
	rm := redisStore(t, url).ReadModel()
	m := readmodel.New(readmodel.Config{Firm: firm, Store: rm, Updates: rm})
	m.Serve(practice.Jobs, nil)
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

func allTombstones(t *testing.T, m *readmodel.Model) []practice.Tombstone {
	t.Helper()
	ts, err := m.Tombstones(context.Background(), live, practice.Jobs, practice.TombstoneQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// A removal leaves the tombstone the removal's event carries; every
// instance lists it; a record that comes back drops it.
func TestRemovalLeavesATombstone(t *testing.T) {
	srv := redistest.Start(t)
	a, b := tombInstance(t, srv.URL()), tombInstance(t, srv.URL())
	ctx := context.Background()
	removedAt := time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)

	if err := a.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: jobAt("job_1", 3)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", At: removedAt}, {Kind: practice.Jobs, ID: "job_never"}}); err != nil {
		t.Fatal(err)
	}
	// The event of the same removal (its change record) carries the same
	// tombstone.
	events, err := dispatcher.Derive(practice.Change{ID: "chg_rm", Firm: firm, Kind: practice.Jobs, ResourceID: "job_1",
		Before: jobAt("job_1", 3), After: json.RawMessage("null"), OccurredAt: removedAt})
	if err != nil || len(events) != 1 {
		t.Fatalf("Derive: %v, %v", events, err)
	}
	var data struct{ Object practice.Tombstone }
	if err := json.Unmarshal(events[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	want := practice.Tombstone{ID: "job_1", Object: "job", Deleted: true, DeletedAt: removedAt.Truncate(time.Millisecond), Version: 4}
	for name, m := range map[string]*readmodel.Model{"the remover": b, "another instance": a} {
		got := allTombstones(t, m)
		if len(got) != 1 || got[0] != want || got[0] != data.Object {
			t.Fatalf("%s lists %+v, want %+v, as the event carries (%+v)", name, got, want, data.Object)
		}
	}

	if err := a.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: jobAt("job_1", 5)}}); err != nil {
		t.Fatal(err)
	}
	if got := allTombstones(t, b); len(got) != 0 {
		t.Fatalf("a record back still has its tombstone: %+v", got)
	}
}

// TestTombstonesFollowTheRecords drives seeded schedules of writes and
// removals of a few jobs through two instances sharing Redis, and checks
// after every step, from both instances: a job ever written is either
// served or has a tombstone, never both and never neither, and the
// tombstone's version follows the last version served.
func TestTombstonesFollowTheRecords(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for seed := uint64(1); seed <= 20; seed++ {
		insts := []*readmodel.Model{tombInstance(t, srv.URL()), tombInstance(t, srv.URL())}
		rnd := rand.New(rand.NewPCG(seed, 42))
		ids := []string{"job_a", "job_b", "job_c", "job_d"}
		for i := range ids {
			ids[i] = fmt.Sprintf("%s_%d", ids[i], seed)
		}
		version := map[string]int{}
		served := map[string]bool{}
		for step := range 60 {
			m := insts[rnd.IntN(2)]
			var us []readmodel.Update
			for range 1 + rnd.IntN(3) {
				id := ids[rnd.IntN(len(ids))]
				if rnd.IntN(3) == 0 {
					us = append(us, readmodel.Update{Kind: practice.Jobs, ID: id, At: epoch.Add(time.Duration(step) * time.Minute)})
					served[id] = false
					continue
				}
				version[id]++
				us = append(us, readmodel.Update{Kind: practice.Jobs, ID: id, Raw: jobAt(id, version[id])})
				served[id] = true
			}
			if err := m.Apply(ctx, us); err != nil {
				t.Fatal(err)
			}
			for n, inst := range insts {
				tombs := map[string]practice.Tombstone{}
				for _, ts := range allTombstones(t, inst) {
					tombs[ts.ID] = ts
				}
				for _, id := range ids {
					if version[id] == 0 {
						if _, ok := tombs[id]; ok {
							t.Fatalf("seed %d step %d: instance %d lists a tombstone of %s, never written", seed, step, n, id)
						}
						continue
					}
					_, err := inst.Get(ctx, live, practice.Jobs, id)
					ts, dead := tombs[id]
					switch {
					case served[id] && (err != nil || dead):
						t.Fatalf("seed %d step %d: instance %d: %s is served (%v) with tombstone %v", seed, step, n, id, err, dead)
					case !served[id] && (err == nil || !dead):
						t.Fatalf("seed %d step %d: instance %d: removed %s is served (%v) or has no tombstone (%v)", seed, step, n, id, err == nil, dead)
					case dead && ts.Version != int64(version[id])+1:
						t.Fatalf("seed %d step %d: %s's tombstone has version %d after version %d", seed, step, id, ts.Version, version[id])
					}
				}
				if got := allTombstones(t, inst); !slices.IsSortedFunc(got, func(x, y practice.Tombstone) int { return strings.Compare(x.ID, y.ID) }) {
					t.Fatalf("tombstones out of id order: %v", got)
				}
			}
		}
	}
}
