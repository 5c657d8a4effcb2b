package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// recorded collects the change records a Recorder publishes.
type recorded struct{ changes []practice.Change }

func (r *recorded) Publish(_ context.Context, c practice.Change) error {
	r.changes = append(r.changes, c)
	return nil
}

// A user as Karbon publishes one: no modification time, the same
// version whatever changed. Its name is the read that saw it.
func undatedPerson(id string, n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"object":"person","name":"Read %d","email":"a@example.com","role":"staff","active":true,"version":1}`, id, n))
}

// States of a record that publishes neither a modification time nor a
// version that changes are ordered by when their reads began. Reads of a
// user, each seeing the state of its moment, reach two instances sharing
// Redis in every order a seeded schedule chooses (a poll page read before
// a webhook's re-read arriving after it, one instance noticing what the
// other already stored): both end on the last read's state, and the
// change records, in the order published, never go back to an earlier
// read's state.
func TestUndatedStatesAreOrderedByRead(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	open := func() *readmodel.Model {
		rm := redisStore(t, srv.URL()).ReadModel()
		m := readmodel.New(readmodel.Config{Firm: firm, Store: rm, Updates: rm})
		m.Serve(practice.People, nil)
		if err := m.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	insts := []*readmodel.Model{open(), open()}
	recs := []*changes.Recorder{{State: insts[0]}, {State: insts[1]}}
	const reads = 8
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		id := fmt.Sprintf("usr_%d", seed)
		sink := &recorded{}
		for _, n := range rng.Perm(reads) {
			o := changes.Observation{Tenant: live, Kind: practice.People, ResourceID: id, After: undatedPerson(id, n),
				Created: true, ReadAt: epoch.Add(time.Duration(n) * time.Second)}
			if _, err := recs[rng.IntN(2)].Observe(ctx, sink, o); err != nil {
				t.Fatal(err)
			}
		}
		last := -1
		for _, c := range sink.changes {
			var p practice.Person
			_ = json.Unmarshal(c.After, &p)
			var n int
			fmt.Sscanf(p.Name, "Read %d", &n)
			if n <= last {
				t.Fatalf("seed %d: a change record goes from read %d back to read %d", seed, last, n)
			}
			last = n
		}
		for i, m := range insts {
			raw, err := m.Get(ctx, live, practice.People, id)
			if err != nil {
				t.Fatal(err)
			}
			if want := undatedPerson(id, reads-1); string(raw) != string(want) {
				t.Fatalf("seed %d: instance %d serves %s, want the last read's %s", seed, i, raw, want)
			}
		}
	}
}
