// Package redis is the shared backend: every store interface the gateway
// and the dispatcher declare, kept in Redis so that any number of gateway
// and dispatcher processes act as one.
//
// The gateway's state: credentials, their revocations and last-used times,
// the generated signing key (credentials.go, keys pgw:cred*, pgw:creds*,
// pgw:signing_key), the check that secrets are sealed under the
// configured key (secrets.go, pgw:secrets_check), idempotency keys with their TTL (idempotency.go,
// pgw:idem:*), what upstream adapters keep (upstream.go, pgw:upstream:*,
// sealed), the vendor notifications kept until what they name is read and
// the bodies kept in the last hour (notifications.go, pgw:nb:{<scope>}:*),
// firms' connections and
// the consents awaited (connections.go, pgw:{connect}:*, verifiers sealed)
// and the read model's records, feed, checkpoints and
// leases (readmodel.go, pgw:rm:*). Those calls are single lookups bounded by
// Options.LookupTimeout, so that a slow Redis cannot hold a request.
//
// The webhook pipeline's state (events, endpoints, deliveries): what one
// dispatcher records another serves, and what one claims no other sends
// while its lease holds. Every key starts with the prefix (default
// "pgw:{wh}:"); the hash tag keeps them in one Redis Cluster slot, which
// the scripts need.
//
//	evt:<id>                   event record (SET NX: recorded once)
//	evts:<firm>:<mode>         zset, lexical: "<event id> <kind>" for paging
//	ep:<id>                    endpoint record (with secrets)
//	eps:<firm>:<mode>          zset, lexical: endpoint ids
//	dlv:<id>                   hash: the delivery's fields, state and lease
//	att:<id>                   list: its attempts, oldest first
//	dlvs:<endpoint>            zset, lexical: "<created_at hex><delivery id>"
//	dlvs:<endpoint>:<state>    the same, per state
//	q:<endpoint>               zset: queued delivery ids, score = due (us)
//	heads                      zset: endpoints, score = their queue's head
//	snooze                     hash: endpoint -> snoozed until (us)
//	leases                     zset: leased delivery ids, score = expiry (us)
//	backlog                    integer: deliveries queued
//	log:dlv                    zset, lexical: every delivery id, for pruning
//	log:evt                    zset, lexical: "<event id> <firm>:<mode> <kind>"
//	feed:<firm>:<mode>         stream: event ids in record order (feed.go)
//	horizon                    the retention horizon, an event id floor
//	log:indexed                set once log:dlv and log:evt hold everything
//	sealed                     set once no endpoint holds plain-text secrets
//	sealed_upstream            set once no upstream state value is plain text
//
// The generated signing key, endpoint secrets and every upstream state
// value (vendors' refresh tokens among them) are stored sealed under
// Options.Secrets (internal/sealed).
//
// Every change that must be atomic (recording an attempt with its state,
// claiming, releasing, queuing) is one Lua script (lua/), so a dispatcher
// dying between two commands cannot leave a delivery half-moved. A claim
// moves due ids from their endpoint's queue to leases; a claim that finds
// leases past their expiry queues those deliveries again first, which is
// how a dead dispatcher's work is picked up. Every call is bounded by the
// store's timeout.
//
// "Durable" means acknowledged by Redis: run it with appendonly yes and
// appendfsync always (or everysec and accept a second of exposure to a
// Redis crash) and maxmemory-policy noeviction.
package redis

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/idempotency"
)

// DefaultPrefix starts every key. The braces are a Redis Cluster hash tag.
const DefaultPrefix = "pgw:{wh}:"

// Options tune a Store. Zero values take the defaults given.
type Options struct {
	// Prefix starts every key. Default DefaultPrefix. It must contain a
	// hash tag on Redis Cluster.
	Prefix string
	// Timeout bounds each webhook pipeline call. Default 2s: a claim or a
	// page of deliveries is one script, larger than the gateway's lookups.
	Timeout time.Duration
	// LookupTimeout bounds each of the gateway's calls (a credential, an
	// idempotency key), which a request waits for. Default 250ms.
	LookupTimeout time.Duration
	// InFlight is how long an unanswered idempotency key stays reserved.
	// Default idempotency.InFlight; tests shorten it.
	InFlight time.Duration
	// Secrets seals the generated signing key and endpoint secrets; every
	// process sharing the Redis needs the same key. Required.
	Secrets *sealed.Key
}

// Store is the dispatcher's shared state in Redis. It implements every
// interface in dispatcher.Backends.
type Store struct {
	rdb           goredis.UniversalClient
	prefix        string
	timeout       time.Duration
	lookupTimeout time.Duration
	inFlight      time.Duration
	secrets       *sealed.Key
	scripts       scripts
	// indexed is set once this process knows log:dlv and log:evt are
	// complete (retention.go).
	indexed atomic.Bool
}

// New uses rdb, which the caller owns and closes.
func New(rdb goredis.UniversalClient, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = 250 * time.Millisecond
	}
	if opts.InFlight <= 0 {
		opts.InFlight = idempotency.InFlight
	}
	if opts.Secrets == nil {
		return nil, errors.New("redisstore: no secrets key (Options.Secrets)")
	}
	sc, err := loadScripts()
	if err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, prefix: opts.Prefix, timeout: opts.Timeout, lookupTimeout: opts.LookupTimeout, inFlight: opts.InFlight,
		secrets: opts.Secrets, scripts: sc}, nil
}

// Backends wires the store in as all of the engine's backends.
func (s *Store) Backends() dispatcher.Backends {
	return dispatcher.Backends{Events: s, Endpoints: s, Catalog: s, Queue: s, Attempts: s, Deliveries: s, Pruner: s, Feed: s}
}

func (s *Store) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.timeout)
}

func (s *Store) lookup(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.lookupTimeout)
}

func (s *Store) key(parts ...string) string {
	k := s.prefix
	for _, p := range parts {
		k += p
	}
	return k
}

//go:embed lua/*.lua
var luaFiles embed.FS

// scripts are the store's Lua scripts, each with the shared prelude.
type scripts struct {
	enqueue, claim, release, lease, recordAttempt, requeueFailed,
	snooze, deleteEndpoint, fetch, recordEvents, createEndpoint, prune *goredis.Script
}

func loadScripts() (scripts, error) {
	prelude, err := luaFiles.ReadFile("lua/prelude.lua")
	if err != nil {
		return scripts{}, err
	}
	load := func(name string) *goredis.Script {
		body, rerr := luaFiles.ReadFile("lua/" + name + ".lua")
		if rerr != nil {
			err = rerr
			return nil
		}
		return goredis.NewScript(string(prelude) + "\n" + string(body))
	}
	sc := scripts{
		enqueue:        load("enqueue"),
		claim:          load("claim"),
		release:        load("release"),
		lease:          load("lease"),
		recordAttempt:  load("record_attempt"),
		requeueFailed:  load("requeue_failed"),
		snooze:         load("snooze"),
		deleteEndpoint: load("delete_endpoint"),
		fetch:          load("fetch"),
		recordEvents:   load("record_events"),
		createEndpoint: load("create_endpoint"),
		prune:          load("prune"),
	}
	if err != nil {
		return scripts{}, fmt.Errorf("redisstore: loading scripts: %w", err)
	}
	return sc, nil
}

// run runs a script with the prefix as ARGV[1]; KEYS[1] only routes it to
// the prefix's slot.
func (s *Store) run(ctx context.Context, sc *goredis.Script, args ...any) (any, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return sc.Run(ctx, s.rdb, []string{s.key("backlog")}, append([]any{s.prefix}, args...)...).Result()
}

func tenantKey(t practice.Tenant) string {
	mode := "live"
	if t.Sandbox {
		mode = "sandbox"
	}
	return t.Firm + ":" + mode
}

// micros is t as a score: Unix microseconds, exact in a double. Times
// before 1970 (and the zero time) are 0, due at once.
func micros(t time.Time) string {
	if t.IsZero() || t.Unix() < 0 {
		return "0"
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func fromMicros(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}

// nanos is t for a field read back exactly; "" for the zero time.
func nanos(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func fromNanos(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || s == "" {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// status reads a script's {"ok", ...} answer, mapping the refusals to the
// dispatcher's errors.
func status(res any) ([]any, error) {
	arr, ok := res.([]any)
	if !ok || len(arr) == 0 {
		return nil, fmt.Errorf("unexpected script answer %T", res)
	}
	switch code, _ := arr[0].(string); code {
	case "ok":
		return arr[1:], nil
	case "notfound":
		return nil, dispatcher.ErrNotFound
	case "busy":
		return nil, practice.ErrBusy
	case "leaselost":
		return nil, practice.ErrLeaseLost
	default:
		return nil, fmt.Errorf("unexpected script status %q", code)
	}
}

func isNil(err error) bool { return errors.Is(err, goredis.Nil) }

// Interface guards.
var (
	_ dispatcher.EventLog         = (*Store)(nil)
	_ dispatcher.EndpointRegistry = (*Store)(nil)
	_ dispatcher.EndpointCatalog  = (*Store)(nil)
	_ dispatcher.DeliveryQueue    = (*Store)(nil)
	_ dispatcher.AttemptLog       = (*Store)(nil)
	_ dispatcher.DeliveryReader   = (*Store)(nil)
	_ dispatcher.Pruner           = (*Store)(nil)
)
