package readmodel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

func job(id, stage string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"job","title":"Accounts","client":"cli_1","owner":"usr_1","stage":%q,"closed_at":null,"created_at":"2026-03-02T09:00:00Z","updated_at":"2026-03-02T09:00:00Z","version":1}`, id, stage))
}

// redisStore is one gateway's handle on a shared Redis.
func redisStore(t *testing.T, url string) *redisstore.Store {
	t.Helper()
	rdb, err := redisstore.NewClient(url, redisstore.TLSFiles{}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.Options{Secrets: secretsKey})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// instance is one gateway's model of the firm over a shared Redis.
func instance(t *testing.T, url string) *readmodel.Model {
	t.Helper()
	rm := redisStore(t, url).ReadModel()
	m := readmodel.New(readmodel.Config{Firm: firm, Store: rm, Updates: rm})
	m.Serve(practice.Jobs, nil)
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

func stageOf(t *testing.T, m *readmodel.Model, id string) string {
	t.Helper()
	raw, err := m.Get(context.Background(), live, practice.Jobs, id)
	if err != nil {
		return err.Error()
	}
	var j practice.Job
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	return j.Stage
}

// A write through one instance is read back from another at once, and an
// instance whose Redis is gone keeps answering from what it holds.
func TestInstancesShareTheModelThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	a, b := instance(t, srv.URL()), instance(t, srv.URL())
	ctx := context.Background()

	if err := a.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: job("job_1", "planned")}}); err != nil {
		t.Fatal(err)
	}
	if got := stageOf(t, b, "job_1"); got != "planned" {
		t.Fatalf("B right after A's write: %s", got)
	}
	for _, stage := range []string{"in_progress", "in_review", "filed"} {
		if err := b.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: job("job_1", stage)}}); err != nil {
			t.Fatal(err)
		}
		if got := stageOf(t, a, "job_1"); got != stage {
			t.Fatalf("A right after B's write of %s: %s", stage, got)
		}
	}
	if err := a.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, live, practice.Jobs, "job_1"); err == nil {
		t.Fatal("B still serves the job A removed")
	}

	// A third instance starts from the store, not the feed.
	if err := a.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_2", Raw: job("job_2", "planned")}}); err != nil {
		t.Fatal(err)
	}
	c := instance(t, srv.URL())
	if got := c.Count(practice.Jobs); got != 1 {
		t.Fatalf("a new instance loads %d jobs, want 1", got)
	}

	srv.Kill()
	start := time.Now()
	if got := stageOf(t, c, "job_2"); got != "planned" {
		t.Fatalf("with Redis gone: %s", got)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a read with Redis gone took %s", took)
	}
}

// Two instances writing states of the same records at once, each in an
// order of its own: whatever interleaves between one instance's
// comparison and its write, the shared copy and both instances end on
// each record's newest version, and the shared feed, which every instance
// follows, never takes a record back to an older version.
func TestInstancesWritingAtOnceNeverStoreAnOlderState(t *testing.T) {
	srv := redistest.Start(t)
	a, b := instance(t, srv.URL()), instance(t, srv.URL())
	ctx := context.Background()
	const records, versions = 4, 60
	versioned := func(id string, v int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"job","title":"v%d","client":"cli_1","owner":"usr_1","stage":"planned","closed_at":null,"created_at":"2026-03-02T09:00:00Z","updated_at":"2026-03-02T09:00:00Z","version":%d}`, id, v, v))
	}
	var wg sync.WaitGroup
	for w, m := range []*readmodel.Model{a, b, a, b} {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for _, v := range rng.Perm(versions) {
				id := fmt.Sprintf("job_%d", rng.IntN(records))
				if err := m.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: id, Raw: versioned(id, v+1)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	// The feed, in the order every instance applies it.
	rm := storeOf(t, srv.URL())
	newest := map[string]int{}
	for pos := ""; ; {
		us, next, err := rm.Since(ctx, firm, pos, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			var j struct{ Version int }
			_ = json.Unmarshal(u.Raw, &j)
			if j.Version < newest[u.ID] {
				t.Fatalf("the feed takes %s back from version %d to %d", u.ID, newest[u.ID], j.Version)
			}
			newest[u.ID] = j.Version
		}
		if len(us) == 0 || next == pos {
			break
		}
		pos = next
	}
	for _, m := range []*readmodel.Model{a, b, instance(t, srv.URL())} {
		for id, v := range newest {
			raw, err := m.Get(ctx, live, practice.Jobs, id)
			if err != nil {
				t.Fatal(err)
			}
			var j struct{ Version int }
			_ = json.Unmarshal(raw, &j)
			if j.Version != v {
				t.Fatalf("%s: an instance serves version %d, the newest written is %d", id, j.Version, v)
			}
		}
	}
}

func storeOf(t *testing.T, url string) *redisstore.ReadModel {
	t.Helper()
	rdb, err := redisstore.NewClient(url, redisstore.TLSFiles{}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.Options{Secrets: secretsKey})
	if err != nil {
		t.Fatal(err)
	}
	return st.ReadModel()
}

// A state an earlier version stored with HTML escaping is served in the
// records' one encoding, and the same state read again from the vendor
// raises no change.
func TestEscapedStatesAreServedAsWritten(t *testing.T) {
	ctx := context.Background()
	st := readmodelsim.NewStore(nil)
	escaped := json.RawMessage(`{"id":"cli_1","object":"client","name":"Dunmore \u0026 Sons \u003cHoldings\u003e","updated_at":"2026-03-02T09:00:00Z","version":1772442000000}`)
	if err := st.Apply(ctx, firm, []readmodel.Update{{Kind: practice.Clients, ID: "cli_1", Raw: escaped}}); err != nil {
		t.Fatal(err)
	}
	m := readmodel.New(readmodel.Config{Firm: firm, Store: st})
	m.Serve(practice.Clients, nil)
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"cli_1","object":"client","name":"Dunmore & Sons <Holdings>","updated_at":"2026-03-02T09:00:00Z","version":1772442000000}`
	got, err := m.Get(ctx, live, practice.Clients, "cli_1")
	if err != nil || string(got) != want {
		t.Fatalf("served %s, %v; want %s", got, err, want)
	}
	out := &sink{}
	rec := &changes.Recorder{State: m}
	published, err := rec.Observe(ctx, out, changes.Observation{Tenant: live, Kind: practice.Clients, ResourceID: "cli_1",
		After: json.RawMessage(want)})
	if err != nil || published {
		t.Fatalf("the same state read again: published %t, %v", published, err)
	}
	// And one an adapter encodes escaped is kept as written.
	published, err = rec.Observe(ctx, out, changes.Observation{Tenant: live, Kind: practice.Clients, ResourceID: "cli_1",
		After: json.RawMessage(`{"id":"cli_1","object":"client","name":"Birch \u0026 Co","updated_at":"2026-03-03T09:00:00Z","version":1772528400000}`)})
	if err != nil || !published || len(out.changes) != 1 || !bytes.Contains(out.changes[0].After, []byte(`"Birch & Co"`)) {
		t.Fatalf("a change escaped: published %t, %v, %+v", published, err, out.changes)
	}
	if got, _ := m.Get(ctx, live, practice.Clients, "cli_1"); !bytes.Contains(got, []byte(`"Birch & Co"`)) {
		t.Fatalf("kept %s", got)
	}
}
