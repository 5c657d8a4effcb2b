package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
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
	m := readmodel.New(readmodel.Config{Firm: firm, Store: rm, Feed: rm})
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
