package dispatcher_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/internal/testclock"
	"github.com/practicegw/practicegw/practice"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

var (
	live    = practice.Tenant{Firm: "frm_acme"}
	sandbox = practice.Tenant{Firm: "frm_acme", Sandbox: true}
)

// clockStart is where the engine's clock starts in tests: schedules move
// when the test says, never by sleeping.
var clockStart = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// harness is one engine over a real store, running: a bbolt file or a real
// redis-server, so that the whole engine suite runs over either backend.
type harness struct {
	t     *testing.T
	clock *testclock.Clock
	// open makes another store over the same state, as a second
	// dispatcher process would.
	open  func() testStore
	store testStore
	eng   *dispatcher.Engine
	ctx   context.Context
}

// testStore is what the tests use of a store besides the engine.
type testStore interface {
	dispatcher.DeliveryQueue
	dispatcher.AttemptLog
	dispatcher.DeliveryReader
	Backends() dispatcher.Backends
}

// backend opens stores over one fresh state of one store kind.
type backend struct {
	name string
	// opener returns a function opening stores over one fresh state; every
	// store it opens sees the same state, as processes sharing it would.
	opener func(t *testing.T) func() testStore
}

// backends are the store kinds every engine test runs against.
var backends = []backend{
	{name: "bolt", opener: boltOpener},
	{name: "redis", opener: redisOpener},
}

// eachBackend runs test once per store kind, as a subtest named after it.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// redisOpener uses a real redis-server; redistest skips without one
// locally and fails under CI.
func redisOpener(t *testing.T) func() testStore {
	t.Helper()
	srv := redistest.Start(t)
	rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	secrets, _ := sealed.Random()
	return func() testStore {
		st, err := redisstore.New(rdb, redisstore.Options{Secrets: secrets})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

func boltOpener(t *testing.T) func() testStore {
	t.Helper()
	db := openDB(t)
	secrets, _ := sealed.Random()
	return func() testStore {
		st, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

// loopbackOnly lets tests deliver to httptest servers.
func loopbackOnly() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }

func openDB(t testing.TB) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newHarness starts an engine; cfg's zero fields get test defaults.
func newHarness(t *testing.T, b backend, cfg dispatcher.Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: testclock.New(clockStart), open: b.opener(t), ctx: context.Background()}
	if cfg.Clock == nil {
		cfg.Clock = h.clock.Now
	}
	h.eng, h.store = h.engine(cfg)
	h.run(h.eng)
	return h
}

// engine builds another engine over the harness's state, as a second
// dispatcher process would.
func (h *harness) engine(cfg dispatcher.Config) (*dispatcher.Engine, testStore) {
	h.t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = h.clock.Now
	}
	if cfg.AllowCIDRs == nil {
		cfg.AllowCIDRs = loopbackOnly()
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(h.t, zaptest.Level(zap.WarnLevel))
	}
	if cfg.BreakerFailures == 0 {
		// The breaker keeps wall time (gobreaker has no clock to inject),
		// which the fake clock cannot move past a cooldown; tests that are
		// not about the breaker keep it out of the way.
		cfg.BreakerFailures = 1000
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 100 * time.Millisecond
	}
	st := h.open()
	eng, err := dispatcher.New(cfg, st.Backends())
	if err != nil {
		h.t.Fatal(err)
	}
	return eng, st
}

// run starts eng's loop; it is stopped before the database closes.
func (h *harness) run(eng *dispatcher.Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		// A test that closes the engine before its loop got going sees
		// ErrClosed; anything else is a failure.
		if err := <-done; err != nil && !errors.Is(err, dispatcher.ErrClosed) {
			h.t.Errorf("Run: %v", err)
		}
		eng.Close()
	})
}

func (h *harness) endpoint(t practice.Tenant, url string, events ...string) (dispatcher.Endpoint, string) {
	h.t.Helper()
	if len(events) == 0 {
		events = []string{"*"}
	}
	ep, secret, err := h.eng.CreateEndpoint(h.ctx, t, dispatcher.EndpointInput{URL: url, Events: events})
	if err != nil {
		h.t.Fatalf("CreateEndpoint: %v", err)
	}
	return ep, secret
}

func (h *harness) ingest(c practice.Change) {
	h.t.Helper()
	if err := h.eng.Ingest(h.ctx, c); err != nil {
		h.t.Fatalf("Ingest %s: %v", c.ID, err)
	}
}

func (h *harness) deliveries(endpointID string) []dispatcher.Delivery {
	h.t.Helper()
	page, err := h.store.Deliveries(h.ctx, dispatcher.DeliveryQuery{EndpointID: endpointID, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	return page.Deliveries
}

func (h *harness) delivery(id string) dispatcher.Delivery {
	h.t.Helper()
	d, err := h.store.Delivery(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// only returns the endpoint's single delivery, waiting for it to exist.
func (h *harness) only(endpointID string) dispatcher.Delivery {
	h.t.Helper()
	var ds []dispatcher.Delivery
	eventually.True(h.t, waitWithin, waitTick, "one delivery", func() bool { ds = h.deliveries(endpointID); return len(ds) == 1 })
	return ds[0]
}

// waitAttempts waits until the delivery has n attempts and is not leased
// for more, and returns it.
func (h *harness) waitAttempts(id string, n int) dispatcher.Delivery {
	h.t.Helper()
	var d dispatcher.Delivery
	eventually.True(h.t, waitWithin, waitTick, fmt.Sprintf("%d attempts on %s", n, id), func() bool {
		d = h.delivery(id)
		return len(d.Attempts) >= n
	})
	if len(d.Attempts) != n {
		h.t.Fatalf("delivery has %d attempts, want %d", len(d.Attempts), n)
	}
	return d
}

// due moves the clock to the delivery's next attempt and wakes the loop.
func (h *harness) due(d dispatcher.Delivery) {
	h.t.Helper()
	if d.NextAttemptAt.IsZero() {
		h.t.Fatalf("delivery %s (%s) has no next attempt", d.ID, d.State)
	}
	h.clock.Set(d.NextAttemptAt)
	h.eng.Kick()
}

// settled proves that no attempt is left to come, without waiting: the
// deliveries named are final (no next attempt) and the queue holds nothing,
// so no engine can claim anything, now or at any later clock time. A
// delivery in flight is neither: its lease took it off the queue and it
// stays scheduled until its attempt is recorded.
func (h *harness) settled(ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		if d := h.delivery(id); !d.NextAttemptAt.IsZero() {
			h.t.Fatalf("delivery %s (%s) still has an attempt due at %s", id, d.State, d.NextAttemptAt)
		}
	}
	if n, err := h.store.Backlog(h.ctx); err != nil || n != 0 {
		h.t.Fatalf("Backlog = %d, %v; want nothing waiting", n, err)
	}
}

// waitWithin bounds every wait for the engine's goroutines, polled each
// waitTick: generous, since a loaded machine only makes things slower.
const waitWithin, waitTick = 10 * time.Second, 2 * time.Millisecond

// receiver is an httptest endpoint that keeps every request.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []request
	active  atomic.Int32
	peak    atomic.Int32
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

type request struct {
	header http.Header
	body   []byte
	at     time.Time
}

// newReceiver answers the n-th request (from 1) with respond, or 200.
func newReceiver(t testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{respond: respond}
	// Closing the receiver ends its requests' contexts too, so a handler
	// waiting on one (a "dead" endpoint) returns even for a request that
	// arrives while the server shuts down.
	closing, closed := context.WithCancel(context.Background())
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(closing, cancel)()
		r = r.WithContext(ctx)
		body, _ := io.ReadAll(r.Body)
		now := rc.active.Add(1)
		defer rc.active.Add(-1)
		for {
			p := rc.peak.Load()
			if now <= p || rc.peak.CompareAndSwap(p, now) {
				break
			}
		}
		rc.mu.Lock()
		rc.got = append(rc.got, request{header: r.Header.Clone(), body: body, at: time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(n, w, r)
		}
	}))
	// Cleanups run last in, first out, so this runs before the engine
	// stops: cut the connections first, so that a handler waiting on its
	// request (a "dead" endpoint) returns and Close need not wait for it.
	t.Cleanup(func() {
		closed()
		rc.srv.CloseClientConnections()
		rc.srv.Close()
	})
	return rc
}

func (rc *receiver) URL() string { return rc.srv.URL + "/hooks" }

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

func (rc *receiver) count() int { return len(rc.requests()) }

func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// envelope decodes a received body.
type envelope struct {
	ID         string          `json:"id"`
	Event      string          `json:"event"`
	OccurredAt string          `json:"occurred_at"`
	Firm       string          `json:"firm"`
	Sandbox    bool            `json:"sandbox"`
	Data       json.RawMessage `json:"data"`
}

func decode(t testing.TB, body []byte) envelope {
	t.Helper()
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return env
}

// clientChange is a change creating a new client, with fresh ids.
func clientChange(t practice.Tenant) practice.Change {
	id := strings.ToLower(rand.Text())
	return practice.Change{
		ID:         "chg_" + id,
		Firm:       t.Firm,
		Sandbox:    t.Sandbox,
		Kind:       practice.Clients,
		ResourceID: "cli_" + id,
		After:      json.RawMessage(`{"id":"cli_` + id + `","object":"client","name":"Client ` + id + `"}`),
		OccurredAt: time.Date(2026, 3, 14, 8, 0, 0, 0, time.UTC),
	}
}
