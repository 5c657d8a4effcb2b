package redis_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
	"github.com/practicegw/practicegw/store/credential"
	redisstore "github.com/practicegw/practicegw/store/redis"
	"github.com/practicegw/practicegw/store/storetest"
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
	t.Run("sealed", func(t *testing.T) {
		opts := redisstore.Options{Timeout: 5 * time.Second}
		st := openWith(t, srv, opts)
		storetest.IdempotencySealed(t, st, anotherWith(t, srv, opts), func() []byte { return dumpRedis(t, client(t, srv)) })
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
	rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
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

// The generated signing key and endpoint secrets are sealed in Redis.
func TestSecretsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Secrets(t, func(t *testing.T) storetest.SecretsBackend {
		rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		ctx := context.Background()
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		return storetest.SecretsBackend{
			Open: func(key *sealed.Key) (storetest.SecretStore, error) {
				st, err := redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second, Secrets: key})
				if err != nil {
					return nil, err
				}
				return st, st.PrepareSecrets(ctx)
			},
			Raw: func() []byte { return dumpRedis(t, rdb) },
			WritePlain: func(key credential.SigningKey, ep dispatcher.Endpoint) {
				// The keys and records of the version before sealing.
				sk, _ := json.Marshal(map[string]any{"id": key.ID, "secret": key.Secret})
				rec, _ := json.Marshal(map[string]any{"endpoint": ep, "firm": ep.Firm, "secrets": ep.Secrets})
				p := redisstore.DefaultPrefix
				_, err := rdb.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
					pipe.Set(ctx, "pgw:signing_key", sk, 0)
					pipe.Set(ctx, p+"ep:"+ep.ID, rec, 0)
					pipe.ZAdd(ctx, p+"eps:"+ep.Firm+":live", goredis.Z{Member: ep.ID})
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			UpstreamRaw: func(key string) []byte {
				v, _ := rdb.Get(ctx, "pgw:upstream:"+key).Bytes()
				return v
			},
			WriteUpstreamRaw: func(key string, value []byte) {
				if err := rdb.Set(ctx, "pgw:upstream:"+key, value, 0).Err(); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// dumpRedis is every key and value in the database, whatever its type.
func dumpRedis(t *testing.T, rdb *goredis.Client) []byte {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	for _, k := range keys {
		raw = append(raw, k...)
		var vals []string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			vals = []string{rdb.Get(ctx, k).Val()}
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				vals = append(vals, f, v)
			}
		case "list":
			vals = rdb.LRange(ctx, k, 0, -1).Val()
		case "set":
			vals = rdb.SMembers(ctx, k).Val()
		case "zset":
			vals = rdb.ZRange(ctx, k, 0, -1).Val()
		case "stream":
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					vals = append(vals, f, fmt.Sprint(v))
				}
			}
		default:
			t.Fatalf("key %s is a %s", k, typ)
		}
		for _, v := range vals {
			raw = append(raw, v...)
		}
	}
	return raw
}

func TestNeedsASecretsKey(t *testing.T) {
	if _, err := redisstore.New(goredis.NewClient(&goredis.Options{}), redisstore.Options{}); err == nil {
		t.Fatal("a store without a secrets key opened")
	}
}

// secrets is the key the tests' stores seal under.
var secrets, _ = sealed.Random()

// open connects to srv and empties it, so each test starts clean.
func open(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	return openWith(t, srv, redisstore.Options{Timeout: 5 * time.Second})
}

func openWith(t *testing.T, srv *redistest.Server, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
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
	opts.Secrets = secrets
	rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
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
	fresh, err := redisstore.New(rdb, redisstore.Options{Secrets: secrets})
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
	// The tenant's emptied feed stays: it holds the last position given
	// out, which the next event's must follow.
	want := []string{p + "backlog", p + "ep:we_a", p + "eps:frm_acme:live", p + "eventfeed:frm_acme:live", p + "horizon", p + "log:indexed"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys after pruning everything:\n%v\nwant\n%v", keys, want)
	}
}

func TestReadModelConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.ReadModel(t, func(t *testing.T) (readmodel.Store, readmodel.Store) {
		return open(t, srv).ReadModel(), another(t, srv).ReadModel()
	})
}

// Only the shared store has a feed: a gateway on its own applies its
// updates to its model directly.
func TestReadModelFeedConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.ReadModelFeed(t, func(t *testing.T) storetest.ReadModelFeedBackend {
		rdb := client(t, srv)
		return storetest.ReadModelFeedBackend{
			Store: open(t, srv).ReadModel(),
			Feed:  another(t, srv).ReadModel(),
			Trim: func(firm string, keep int) {
				if err := rdb.XTrimMaxLen(context.Background(), "pgw:rm:{"+firm+"}:feed", int64(keep)).Err(); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

func TestCheckpointsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Checkpoints(t, func(t *testing.T) (readmodel.Checkpoints, readmodel.Checkpoints) {
		return open(t, srv).ReadModel(), another(t, srv).ReadModel()
	})
}

func TestReadModelPurgeConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.ReadModelPurge(t, func(t *testing.T) (storetest.PurgeStore, storetest.PurgeStore) {
		return open(t, srv).ReadModel(), another(t, srv).ReadModel()
	})
}

func TestReadModelFencesConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.ReadModelFences(t, func(t *testing.T) (storetest.FencedStore, storetest.FencedStore) {
		return open(t, srv).ReadModel(), another(t, srv).ReadModel()
	})
}

func TestUpstreamFencesConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.UpstreamFences(t, func(t *testing.T) (readmodel.Fencer, storetest.FencedUpstream) {
		return open(t, srv).ReadModel(), another(t, srv)
	})
}

func TestUpstreamSwapsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.UpstreamSwaps(t, func(t *testing.T) (readmodel.Fencer, storetest.SwappingUpstream, storetest.SwappingUpstream) {
		st := open(t, srv)
		return st.ReadModel(), st, another(t, srv)
	})
}

func TestLocksConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Locks(t, func(t *testing.T) (upstream.Locks, upstream.Locks) {
		return open(t, srv).ReadModel(), another(t, srv).ReadModel()
	})
}

func TestLeasesConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Leases(t, func(t *testing.T) (readmodel.Leases, readmodel.Leases) {
		return open(t, srv).ReadModel(), another(t, srv).ReadModel()
	})
}

// A Redis the version that sealed endpoint secrets already went over
// (its mark set) still has its upstream state sealed at start; and a value
// an instance of that version writes in plain text during a rolling
// upgrade is read, and sealed in place by the first read.
func TestUpstreamStateSealedAfterAnEarlierSealingVersion(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := client(t, srv)
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	key, _ := sealed.Random()
	rdb.Set(ctx, redisstore.DefaultPrefix+"sealed", "1", 0)
	rdb.Set(ctx, "pgw:upstream:oauth2/xero/c/refresh_token", "refresh-before", 0)
	st, err := redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second, Secrets: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PrepareSecrets(ctx); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, "pgw:upstream:oauth2/xero/c/refresh_token").Val(); !sealed.IsSealed([]byte(v)) {
		t.Fatalf("left in plain text: %q", v)
	}

	rdb.Set(ctx, "pgw:upstream:oauth2/xero/c/refresh_token", "refresh-rotated-by-an-old-instance", 0)
	got, err := st.Last(ctx, "oauth2/xero/c/refresh_token")
	if err != nil || string(got) != "refresh-rotated-by-an-old-instance" {
		t.Fatalf("read %q, %v", got, err)
	}
	if v := rdb.Get(ctx, "pgw:upstream:oauth2/xero/c/refresh_token").Val(); !sealed.IsSealed([]byte(v)) {
		t.Fatalf("read but left in plain text: %q", v)
	}
	if got, err := st.Last(ctx, "oauth2/xero/c/refresh_token"); err != nil || string(got) != "refresh-rotated-by-an-old-instance" {
		t.Fatalf("read again %q, %v", got, err)
	}
}

func TestNotificationsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Notifications(t, func(t *testing.T) (storetest.NotificationInbox, storetest.NotificationInbox) {
		return open(t, srv), another(t, srv)
	})
}

func TestForwardNoncesConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.ForwardNonces(t, func(t *testing.T) (storetest.Nonces, storetest.Nonces) {
		return open(t, srv), another(t, srv)
	})
}

func TestFencedCheckpointsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.FencedCheckpoints(t, func(t *testing.T) (storetest.LeasedCheckpoints, storetest.LeasedCheckpoints) {
		return open(t, srv).ReadModel(), another(t, srv).ReadModel()
	})
}

// The tombstone keys an earlier version kept beside the read model go at
// the first start; the records, their feed and other firms' keys stay, and
// a later start, finding its mark, scans nothing.
func TestRetiredTombstoneKeysAreDropped(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := context.Background()
	st := open(t, srv)
	if err := st.ReadModel().Apply(ctx, "frm_a", []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: json.RawMessage(`{"id":"job_1"}`)}}); err != nil {
		t.Fatal(err)
	}
	retired := []string{"pgw:rm:{frm_a}:tomb:jobs", "pgw:rm:{frm_a}:tombid:jobs", "pgw:rm:{frm_b}:tombat:clients"}
	for _, k := range retired {
		if err := rdb.Set(ctx, k, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.ReadModel().DropRetiredTombstones(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, retired...).Val(); n != 0 {
		t.Fatalf("%d retired tombstone keys left", n)
	}
	var kept int
	if err := st.ReadModel().Load(ctx, "frm_a", func(readmodel.Update) error { kept++; return nil }); err != nil || kept != 1 {
		t.Fatalf("the firm's records after the drop: %d (%v)", kept, err)
	}
	// Once marked done, a key of that shape made later is not looked for.
	if err := rdb.Set(ctx, retired[0], "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := another(t, srv).ReadModel().DropRetiredTombstones(ctx); err != nil || rdb.Exists(ctx, retired[0]).Val() != 1 {
		t.Fatalf("a second start scanned again: %v", err)
	}
}

// Connections through two clients of one Redis. A handle under another
// key is made without the start check (PrepareSecrets), so the suite sees
// that it cannot read a consent's verifier either.
func TestConnectionsConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Connections(t, func(t *testing.T) storetest.ConnectionsBackend {
		rdb := client(t, srv)
		if err := rdb.FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		return storetest.ConnectionsBackend{
			Open: func(key *sealed.Key) (storetest.ConnectStore, error) {
				return redisstore.New(client(t, srv), redisstore.Options{Timeout: 5 * time.Second, Secrets: key})
			},
			Raw: func() []byte { return dumpRedis(t, rdb) },
			CopyAuthorization: func(from, to string) {
				ctx := context.Background()
				if err := rdb.Copy(ctx, authorizationKey(from), authorizationKey(to), 0, false).Err(); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// authorizationKey is the key a consent is kept under: its state's SHA-256.
func authorizationKey(state string) string {
	sum := sha256.Sum256([]byte(state))
	return "pgw:{connect}:auth:" + hex.EncodeToString(sum[:])
}

// Redis drops a consent when it expires, so nobody has to: its key lives
// as long as the consent has left, and one saved expired is not kept.
func TestAuthorizationsExpireInRedis(t *testing.T) {
	srv := redistest.Start(t)
	st := open(t, srv)
	rdb := client(t, srv)
	ctx := context.Background()
	saved := time.Now()
	awaited := connection.Authorization{OAuthState: "state-awaited", Start: "start-awaited", Connection: "con_a", Firm: "frm_acme",
		Verifier: "v", Expires: saved.Add(connection.AuthorizationTTL)}
	late := awaited
	late.OAuthState, late.Start, late.Expires = "state-late", "start-late", saved.Add(-time.Second)
	for _, a := range []connection.Authorization{awaited, late} {
		if err := st.SaveAuthorization(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, pattern := range []string{"pgw:{connect}:auth:*", "pgw:{connect}:start:*"} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys %v, %v; want the awaited consent's", keys, err)
		}
		ttl, err := rdb.PTTL(ctx, keys[0]).Result()
		if err != nil || ttl <= 0 || ttl > connection.AuthorizationTTL || ttl < connection.AuthorizationTTL-time.Since(saved)-time.Second {
			t.Fatalf("%s lives %v (%v), want about %v", keys[0], ttl, err, connection.AuthorizationTTL)
		}
	}
	// Started, the consent keeps its time to live.
	if _, err := st.StartAuthorization(ctx, awaited.Start, "browser", time.Now()); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.PTTL(ctx, authorizationKey(awaited.OAuthState)).Result(); err != nil || ttl <= 0 || ttl > connection.AuthorizationTTL {
		t.Fatalf("the started consent's key lives %v (%v)", ttl, err)
	}
}

func BenchmarkListConnections(b *testing.B) {
	srv := redistest.Start(b)
	rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	st, err := redisstore.New(rdb, redisstore.Options{Secrets: secrets})
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkListConnections(b, st, 500)
}

// A Redis that is down is an error for the callback to report, not a
// state it reads as unknown (which would refuse the consent as forged),
// and it holds nobody longer than the lookup's bound; the consent is there
// when Redis is back.
func TestAuthorizationsThroughAnOutage(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAOF())
	st := open(t, srv)
	ctx := context.Background()
	a := connection.Authorization{OAuthState: "state-outage", Start: "start-outage", Connection: "con_a", Firm: "frm_acme",
		Verifier: "v-outage", Expires: time.Now().Add(connection.AuthorizationTTL)}
	if err := st.SaveAuthorization(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartAuthorization(ctx, a.Start, "browser", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateConnection(ctx, connection.Connection{ID: "con_a", Firm: "frm_acme", Status: connection.Pending}); err != nil {
		t.Fatal(err)
	}
	// Stopped cleanly, so that the append-only file holds every write:
	// what is under test is the outage, not Redis's durability.
	srv.Stop()

	started := time.Now()
	if _, err := st.TakeAuthorization(ctx, a.OAuthState, "browser", time.Now()); err == nil || errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("take with Redis down: %v, want an outage error", err)
	}
	if _, err := st.Connection(ctx, "con_a"); err == nil || errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("read with Redis down: %v, want an outage error", err)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("calls to a Redis that is down took %v", took)
	}

	srv.Restart()
	got, err := st.TakeAuthorization(ctx, a.OAuthState, "browser", time.Now())
	if err != nil || got.Verifier != a.Verifier {
		t.Fatalf("after the outage: %+v, %v", got, err)
	}
}
