package kafka_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/practicegw/practicegw/caddymodule/gateway"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// childEnv marks the test binary run as a dispatcher process, so that a
// test can SIGKILL a real one.
const childEnv = "PRACTICEGW_TEST_DISPATCHER_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild is `practicegw dispatcher` with the test's short timeouts,
// configured from the environment as the command is.
func runChild() int {
	cfg, err := gateway.DispatcherConfig(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	childTimings(&cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := kafka.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// childTimings shortens what a test would otherwise wait for: a dead
// member's session, a dead dispatcher's leases.
func childTimings(cfg *kafka.Config) {
	cfg.SessionTimeout = 2 * time.Second
	cfg.Engine.Timeout = 2 * time.Second
	cfg.Engine.LeaseDuration = 4 * time.Second
	cfg.Engine.PollInterval = 200 * time.Millisecond
}

var (
	live   = practice.Tenant{Firm: "frm_acme"}
	topics = kafka.Topics{Changes: "test.changes", Events: "test.events"}
)

// env is a Kafka cluster (kfake, in process, three brokers) and a real
// redis-server, with the gateway's side: an engine to register endpoints
// and a publisher for changes.
type env struct {
	t        *testing.T
	kafka    *kfake.Cluster
	brokers  []string
	security kafka.Security
	redis    *redistest.Server
	rdb      *redis.Client
	gateway  *dispatcher.Engine
	store    *redisstore.Store // the gateway's, shared with every dispatcher
	pub      *kafka.Publisher
	// secrets is the key the gateway and dispatchers share, and its
	// base64 for PRACTICEGW_SECRETS_KEY.
	secrets    *sealed.Key
	secretsB64 string
}

func newEnv(t *testing.T, opts ...redistest.Option) *env {
	t.Helper()
	return newSecuredEnv(t, kafka.Security{}, nil, opts...)
}

// newSecuredEnv is newEnv with a cluster that kopts configure (TLS, SASL)
// and that every client reaches with sec.
func newSecuredEnv(t *testing.T, sec kafka.Security, kopts []kfake.Opt, opts ...redistest.Option) *env {
	t.Helper()
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(6, topics.Changes, topics.Events),
		kfake.GroupMinSessionTimeout(time.Second)}, kopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	e := &env{t: t, kafka: cluster, brokers: cluster.ListenAddrs(), security: sec, redis: redistest.Start(t, opts...)}
	ropts, err := redis.ParseURL(e.redis.URL())
	if err != nil {
		t.Fatal(err)
	}
	e.rdb = redis.NewClient(ropts)
	t.Cleanup(func() { e.rdb.Close() })
	e.secrets, e.secretsB64 = sealed.Random()
	store, err := redisstore.New(e.rdb, redisstore.Options{Secrets: e.secrets})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	e.gateway, err = dispatcher.New(dispatcher.Config{AllowCIDRs: loopback(), Registerer: prometheus.NewRegistry(),
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}, store.Backends())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.gateway.Close() })
	e.pub = kafka.NewPublisher(kafka.PublisherConfig{Brokers: e.brokers, Security: sec, Topic: topics.Changes})
	t.Cleanup(func() { e.pub.Close() })
	return e
}

func loopback() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }

// config is a dispatcher's configuration for this environment.
func (e *env) config() kafka.Config {
	cfg := kafka.Config{
		Brokers: e.brokers, Security: e.security, Topics: topics,
		Open:       gateway.DispatcherRedis{URL: e.redis.URL(), Secrets: e.secrets}.Open,
		Engine:     dispatcher.Config{AllowCIDRs: loopback()},
		Logger:     zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel)),
		Registerer: prometheus.NewRegistry(),
	}
	childTimings(&cfg)
	return cfg
}

// dispatcher runs one in this process until the test ends or stop is
// called; stop returns once it has drained and left the group.
func (e *env) dispatcher(cfg kafka.Config) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- kafka.Run(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("dispatcher: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// child runs a dispatcher as a separate process: this test binary in
// child mode. kill ends it with SIGKILL.
func (e *env) child() (kill func()) {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1",
		"PRACTICEGW_KAFKA="+strings.Join(e.brokers, ","),
		"PRACTICEGW_REDIS="+e.redis.URL(),
		"PRACTICEGW_SECRETS_KEY="+e.secretsB64,
		"PRACTICEGW_KAFKA_CHANGES_TOPIC="+topics.Changes,
		"PRACTICEGW_KAFKA_EVENTS_TOPIC="+topics.Events,
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8",
	)
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	var once sync.Once
	kill = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
		})
	}
	e.t.Cleanup(kill)
	return kill
}

func (e *env) endpoint(url string) (dispatcher.Endpoint, string) {
	e.t.Helper()
	ep, secret, err := e.gateway.CreateEndpoint(context.Background(), live, dispatcher.EndpointInput{URL: url, Events: []string{"*"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return ep, secret
}

func (e *env) publish(cs ...practice.Change) {
	e.t.Helper()
	if err := e.pub.PublishBatch(context.Background(), cs); err != nil {
		e.t.Fatal(err)
	}
}

// change creates a client; its event id is EventID(change).
func change(name string) practice.Change {
	id := strings.ToLower(rand.Text())[:12]
	return practice.Change{
		ID: "chg_" + id, Firm: live.Firm, Kind: practice.Clients, ResourceID: "cli_" + id,
		After:      json.RawMessage(`{"id":"cli_` + id + `","object":"client","name":` + strconv.Quote(name) + `}`),
		OccurredAt: time.Now().UTC(),
	}
}

func eventID(c practice.Change) string {
	evs, err := dispatcher.Derive(c)
	if err != nil || len(evs) != 1 {
		panic(fmt.Sprintf("derive %s: %d events, %v", c.ID, len(evs), err))
	}
	return evs[0].ID
}

// receiver is a webhook endpoint that checks every signature and keeps
// what arrived.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	secret  string
	mu      sync.Mutex
	got     map[string]int // event id -> requests
	at      map[string]time.Time
	bodies  map[string][]byte
	respond func(http.ResponseWriter, *http.Request)
}

func newReceiver(t *testing.T, respond func(http.ResponseWriter, *http.Request)) *receiver {
	rc := &receiver{t: t, got: map[string]int{}, at: map[string]time.Time{}, bodies: map[string][]byte{}, respond: respond}
	// Closing the receiver ends its requests' contexts too, so a handler
	// waiting on one (a "dead" endpoint) returns even for a request that
	// arrives while the server shuts down.
	closing, closed := context.WithCancel(context.Background())
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(closing, cancel)()
		rc.serve(w, r.WithContext(ctx))
	}))
	t.Cleanup(func() {
		closed()
		rc.srv.CloseClientConnections()
		rc.srv.Close()
	})
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	// Read first: only then does the server notice a client hanging up,
	// which a handler waiting on the request's context relies on.
	body, _ := io.ReadAll(r.Body)
	if rc.respond != nil {
		rc.respond(w, r)
		return
	}
	id := r.Header.Get(dispatcher.HeaderID)
	ts, _ := strconv.ParseInt(r.Header.Get(dispatcher.HeaderTimestamp), 10, 64)
	rc.mu.Lock()
	secret := rc.secret
	rc.mu.Unlock()
	want, err := dispatcher.Sign([]string{secret}, id, time.Unix(ts, 0), body)
	var env struct {
		ID string `json:"id"`
	}
	json.Unmarshal(body, &env)
	if err != nil || r.Header.Get(dispatcher.HeaderSignature) != want || env.ID != id {
		rc.t.Errorf("bad webhook: id %q, envelope id %q, signature %q (want %q, %v)", id, env.ID,
			r.Header.Get(dispatcher.HeaderSignature), want, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.got[id]++
	if _, ok := rc.at[id]; !ok {
		rc.at[id] = time.Now()
		rc.bodies[id] = body
	}
	rc.mu.Unlock()
}

func (rc *receiver) URL() string { return rc.srv.URL + "/hooks" }

// settled waits until the shared store says no request is left to come to
// endpointID: every delivery final, each with as many attempts recorded as
// the receiver has answered for its event, and nothing queued. Only then
// does counting what arrived say what arrived in the end.
func (e *env) settled(rc *receiver, endpointID string, within time.Duration) {
	e.t.Helper()
	eventually.NoError(e.t, within, 10*time.Millisecond, "the deliveries to settle", func() error {
		return e.unsettled(rc, endpointID)
	})
}

// unsettled says what may still come to endpointID, nil when nothing.
func (e *env) unsettled(rc *receiver, endpointID string) error {
	ctx := context.Background()
	counts := rc.counts()
	q := dispatcher.DeliveryQuery{EndpointID: endpointID, Limit: 200}
	for {
		page, err := e.gateway.ListDeliveries(ctx, live, q)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, d := range page.Deliveries {
			if !d.NextAttemptAt.IsZero() || len(d.Attempts) != counts[d.EventID] {
				return fmt.Errorf("delivery %s is %s with %d attempts recorded and %d requests received",
					d.ID, d.State, len(d.Attempts), counts[d.EventID])
			}
		}
		if !page.HasMore {
			break
		}
		q.Cursor = page.Next
	}
	if n, err := e.store.Backlog(ctx); err != nil || n != 0 {
		return fmt.Errorf("backlog %d (%v)", n, err)
	}
	return nil
}

// register makes rc an endpoint of e's firm.
func (rc *receiver) register(e *env) dispatcher.Endpoint {
	ep, secret := e.endpoint(rc.URL())
	rc.mu.Lock()
	rc.secret = secret
	rc.mu.Unlock()
	return ep
}

// has reports how many of ids have arrived.
func (rc *receiver) has(ids []string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, id := range ids {
		if rc.got[id] > 0 {
			n++
		}
	}
	return n
}

func (rc *receiver) counts() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return maps.Clone(rc.got)
}

// waitAll waits until every id has arrived at rc.
func (rc *receiver) waitAll(ids []string, within time.Duration) {
	rc.t.Helper()
	eventually.NoError(rc.t, within, 20*time.Millisecond, "every event to arrive", func() error {
		if n := rc.has(ids); n < len(ids) {
			return fmt.Errorf("%d of %d events arrived", n, len(ids))
		}
		return nil
	})
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// counter reads a counter's total from a registry.
func counter(t *testing.T, reg prometheus.Registerer, name string) float64 {
	t.Helper()
	mfs, err := reg.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

func redistestAOF() redistest.Option { return redistest.WithAOF() }

// waitMembers waits until the group has n members, each holding
// partitions.
func (e *env) waitMembers(group string, n int) {
	e.t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(e.brokers...), Timeout: 5 * time.Second}
	eventually.NoError(e.t, 20*time.Second, 50*time.Millisecond, fmt.Sprintf("the group to settle with %d members holding partitions", n), func() error {
		res, err := client.DescribeGroups(context.Background(), &kafkago.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(res.Groups) == 1 && res.Groups[0].GroupState == "Stable" {
			holding := 0
			for _, m := range res.Groups[0].Members {
				for _, t := range m.MemberAssignments.Topics {
					if len(t.Partitions) > 0 {
						holding++
						break
					}
				}
			}
			if holding == n {
				return nil
			}
		}
		return fmt.Errorf("%+v, %v", res, err)
	})
}
