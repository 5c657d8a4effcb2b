package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/practice"
	"github.com/practicegw/practicegw/internal/redistest"
)

func TestValidHMAC(t *testing.T) {
	body := []byte(`{"events":[]}`)
	key := "webhook-key"
	good := vendortest.SignXero(key, body)
	hexSig := vendortest.SignKarbon(key, body)
	cases := []struct {
		name string
		key  string
		sig  string
		ok   bool
	}{
		{"base64", key, good, true},
		{"hex", key, hexSig, true},
		{"wrong key", "other", good, false},
		{"empty signature", key, "", false},
		{"no key configured", "", good, false},
		{"truncated", key, good[:10], false},
		{"garbage", key, "not a signature", false},
	}
	for _, tc := range cases {
		if got := upstream.ValidHMAC([]byte(tc.key), body, tc.sig); got != tc.ok {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.ok)
		}
	}
	if upstream.ValidHMAC([]byte(key), []byte(`{"events":[{}]}`), good) {
		t.Error("a signature of another body passed")
	}
}

type sink struct{ changes []practice.Change }

func (s *sink) Publish(_ context.Context, c practice.Change) error {
	s.changes = append(s.changes, c)
	return nil
}

func TestRecorder(t *testing.T) {
	rec := &upstream.Recorder{State: upstream.NewMemoryState(), Clock: vendortest.NewClock(time.Unix(1_700_000_000, 0))}
	s := &sink{}
	ctx := context.Background()
	tenant := practice.Tenant{Firm: "frm_a"}
	obs := func(v, stage string) upstream.Observation {
		after, _ := json.Marshal(map[string]string{"id": "job_1", "stage": stage})
		return upstream.Observation{Tenant: tenant, Kind: practice.Jobs, ResourceID: "job_1", After: after, Version: v, Created: v == "v1"}
	}
	for _, step := range []struct {
		o         upstream.Observation
		published bool
	}{
		{obs("v1", "planned"), true},
		{obs("v1", "planned"), false}, // the same delivery again
		{obs("v2", "in_review"), true},
	} {
		got, err := rec.Observe(ctx, s, step.o)
		if err != nil || got != step.published {
			t.Fatalf("published %v, %v; want %v", got, err, step.published)
		}
	}
	if len(s.changes) != 2 || s.changes[0].Before != nil || string(s.changes[1].Before) != string(s.changes[0].After) {
		t.Fatalf("changes = %+v", s.changes)
	}
	if s.changes[0].ID == s.changes[1].ID || s.changes[0].ID[:4] != "chg_" {
		t.Fatalf("ids %s %s", s.changes[0].ID, s.changes[1].ID)
	}
	if id := upstream.ChangeID(tenant, practice.Jobs, "job_1", "v1", s.changes[0].After); id != s.changes[0].ID {
		t.Fatal("change ids are not deterministic")
	}

	// A record first seen on an update is only remembered; the next
	// change to it has its before.
	other := func(stage string) upstream.Observation {
		after, _ := json.Marshal(map[string]string{"id": "job_2", "stage": stage})
		return upstream.Observation{Tenant: tenant, Kind: practice.Jobs, ResourceID: "job_2", After: after, Version: stage}
	}
	if got, _ := rec.Observe(ctx, s, other("planned")); got {
		t.Fatal("a record first seen on an update was published with no before")
	}
	if got, _ := rec.Observe(ctx, s, other("filed")); !got || string(s.changes[2].Before) != `{"id":"job_2","stage":"planned"}` {
		t.Fatalf("published %v, changes %+v", got, s.changes)
	}
	// A write that read the record first supplies the before itself.
	known := other("filed")
	known.ResourceID, known.Before = "job_3", json.RawMessage(`{"id":"job_3","stage":"planned"}`)
	if got, _ := rec.Observe(ctx, s, known); !got || string(s.changes[3].Before) != string(known.Before) {
		t.Fatal("a known before was not used")
	}
	// Baseline never overwrites what was seen.
	rec.Baseline(ctx, tenant, practice.Jobs, "job_3", json.RawMessage(`{}`))
	if last, _ := rec.State.Last(ctx, upstream.StateKey(tenant, practice.Jobs, "job_3")); string(last) != string(known.After) {
		t.Fatalf("baseline overwrote %s", last)
	}
}

func TestRedisBudgetIsShared(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	a, b := upstream.NewRedisBudget(rdb, "t:"), upstream.NewRedisBudget(rdb, "t:")
	ctx := context.Background()
	for i := range 4 {
		budget := a
		if i%2 == 1 {
			budget = b
		}
		wait, err := budget.Take(ctx, "karbon:acct", 4, time.Minute)
		if err != nil || wait != 0 {
			t.Fatalf("take %d: wait %v, err %v", i, wait, err)
		}
	}
	wait, err := b.Take(ctx, "karbon:acct", 4, time.Minute)
	if err != nil || wait < 14*time.Second || wait > 15*time.Second {
		t.Fatalf("fifth take: wait %v, err %v; want about 15s", wait, err)
	}
	if wait, _ := a.Take(ctx, "karbon:other", 4, time.Minute); wait != 0 {
		t.Fatal("budgets of two accounts are shared")
	}
}

func TestParallel(t *testing.T) {
	var n atomic.Int64
	err := upstream.Parallel(context.Background(), 3, 20, func(ctx context.Context, i int) error {
		n.Add(1)
		return nil
	})
	if err != nil || n.Load() != 20 {
		t.Fatalf("ran %d, err %v", n.Load(), err)
	}
	boom := errors.New("boom")
	err = upstream.Parallel(context.Background(), 3, 20, func(ctx context.Context, i int) error {
		if i == 4 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}
