package redis_test

import (
	"context"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/practice"
	"github.com/practicegw/practicegw/internal/redistest"
	redisstore "github.com/practicegw/practicegw/internal/store/redis"
	"github.com/practicegw/practicegw/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Deliveries(t, func(t *testing.T) dispatcher.Backends {
		return open(t, srv).Backends()
	})
}

// The gateway's own stores; the second handle is another instance's
// client on the same Redis.
func TestCredentialsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Credentials(t, func(t *testing.T) (storetest.CredentialStore, storetest.CredentialStore) {
		return open(t, srv), another(t, srv)
	})
}

// Only the shared store has a revocation feed: a gateway on its own hears
// of its revocations directly.
func TestRevocationsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Revocations(t, func(t *testing.T) (storetest.RevocationStore, storetest.RevocationStore) {
		return open(t, srv), another(t, srv)
	})
}

func TestIdempotencyConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Idempotency(t, func(t *testing.T, inFlight time.Duration) (storetest.IdempotencyStore, storetest.IdempotencyStore) {
		opts := redisstore.Options{Timeout: 5 * time.Second, InFlight: inFlight}
		return openWith(t, srv, opts), anotherWith(t, srv, opts)
	})
}

// The rate limiter's hourly usage, which its Lua script also writes.
func TestUsageConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Usage(t, func(t *testing.T) (storetest.UsageStore, storetest.UsageStore) {
		open(t, srv) // empties srv
		return redisstore.NewRateLimits(client(t, srv)), redisstore.NewRateLimits(client(t, srv))
	})
}

// client is a client of srv, closed when t ends.
func client(t *testing.T, srv *redistest.Server) *goredis.Client {
	t.Helper()
	rdb, err := redisstore.NewClient(srv.URL(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestUpstreamStateConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Upstream(t, func(t *testing.T) (storetest.UpstreamState, storetest.UpstreamState) {
		return open(t, srv), another(t, srv)
	})
}

// open connects to srv and empties it, so each test starts clean.
func open(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	return openWith(t, srv, redisstore.Options{Timeout: 5 * time.Second})
}

func openWith(t *testing.T, srv *redistest.Server, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	rdb, err := redisstore.NewClient(srv.URL(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return anotherWith(t, srv, opts)
}

// another is a second store on srv, as another instance has, without
// emptying it.
func another(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	return anotherWith(t, srv, redisstore.Options{Timeout: 5 * time.Second})
}

func anotherWith(t *testing.T, srv *redistest.Server, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	rdb, err := redisstore.NewClient(srv.URL(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Pruning leaves no key of what it removed behind (attempts included), and
// a store written before the pruning indexes existed is indexed first.
func TestPruneLeavesNothingBehind(t *testing.T) {
	srv := redistest.Start(t)
	st := open(t, srv)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	tenant := practice.Tenant{Firm: "frm_acme"}
	ep := dispatcher.Endpoint{ID: "we_a", Firm: tenant.Firm, URL: "https://example.com/a", Events: []string{"*"},
		Status: dispatcher.EndpointEnabled, CreatedAt: t0}
	if err := st.CreateEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	ev := dispatcher.Event{ID: dispatcher.EventID("chg_1", dispatcher.ClientCreated, t0), Event: dispatcher.ClientCreated,
		OccurredAt: t0, Firm: tenant.Firm, Data: []byte(`{}`)}
	if _, err := st.Record(ctx, []dispatcher.Event{ev}); err != nil {
		t.Fatal(err)
	}
	ds := dispatcher.FanOut(ev, []dispatcher.Endpoint{ep}, t0)
	if _, err := st.Enqueue(ctx, ds); err != nil {
		t.Fatal(err)
	}
	c, err := st.Lease(ctx, ds[0].ID, t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	a := &dispatcher.Attempt{Number: 1, Trigger: dispatcher.TriggerScheduled, StartedAt: t0, ResponseCode: 200}
	if _, err := st.RecordAttempt(ctx, c.Lease, dispatcher.Outcome{Attempt: a, State: dispatcher.StateDelivered, At: t0}); err != nil {
		t.Fatal(err)
	}

	opts, _ := goredis.ParseURL(srv.URL())
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	// As a store written before the pruning indexes existed holds it.
	p := redisstore.DefaultPrefix
	if err := rdb.Del(ctx, p+"log:dlv", p+"log:evt", p+"log:indexed").Err(); err != nil {
		t.Fatal(err)
	}
	fresh, err := redisstore.New(rdb, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := fresh.Prune(ctx, dispatcher.PruneRequest{Before: t0.Add(time.Hour), Max: 10})
	if err != nil || res.Events != 1 || res.Deliveries != 1 || res.Next != "" {
		t.Fatalf("Prune = %+v, %v", res, err)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{p + "backlog", p + "ep:we_a", p + "eps:frm_acme:live", p + "horizon", p + "log:indexed"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys after pruning everything:\n%v\nwant\n%v", keys, want)
	}
}
