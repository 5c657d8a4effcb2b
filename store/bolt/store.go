// Package bolt is the embedded backend: every store interface the gateway
// and the dispatcher declare, kept in the one bbolt file of a gateway that
// runs alone.
//
// The gateway's own state lives in buckets prefixed "gw_": credentials
// and signing keys (credentials.go), idempotency keys (idempotency.go),
// hourly usage (usage.go), what upstream adapters last saw (upstream.go),
// the vendor notifications handled in the last hour (notifications.go),
// firms' connections and the consents awaited (connections.go),
// the read model's records, checkpoints and leases (readmodel.go) and the
// check that secrets are sealed under the store's key (secrets.go). The generated signing key, endpoint secrets and upstream state are stored
// sealed.
//
// The webhook pipeline's state (events, endpoints, deliveries, the
// per-endpoint delivery queues and the indexes that keep every query from
// scanning everything) lives under top-level buckets prefixed "dispatch_":
//
//	dispatch_events                 event id -> event record
//	dispatch_events_by_tenant       firm NUL mode NUL event id -> kind
//	dispatch_endpoints              endpoint id -> endpoint record (with secrets)
//	dispatch_endpoints_by_tenant    firm NUL mode NUL endpoint id -> nothing
//	dispatch_deliveries             delivery id -> delivery record (with lease)
//	dispatch_deliveries_by_endpoint endpoint id NUL created_at delivery id -> state
//	dispatch_queue                  endpoint id NUL due time delivery id -> nothing
//	dispatch_queue_heads            head time endpoint id -> nothing
//	dispatch_queue_state            endpoint id -> head time, snoozed until
//	dispatch_leases                 lease expiry delivery id -> endpoint id
//	dispatch_meta                   "backlog" -> deliveries queued,
//	                                "horizon" -> the retention horizon (retention.go)
//	dispatch_event_feeds            firm NUL mode NUL / sequence -> event id (feed.go)
//
// Times in keys are 8-byte big-endian Unix nanoseconds, so byte order is
// time order. A waiting delivery is in its endpoint's queue at its next
// attempt time; a claimed one is in dispatch_leases at its lease expiry,
// and a claim puts deliveries whose lease ran out (their dispatcher died)
// back in their queue first, so no sweeper is needed. An endpoint's head is
// the time its earliest queued delivery falls due, or the end of its
// snooze if later: a claim walks heads, not deliveries, so an endpoint with
// a long backlog costs it one key.
//
// Every write goes through the file's group committer (internal/groupcommit):
// concurrent writes share one transaction and its fsyncs, with the demo
// records' writes when the gateway gives both the same committer
// (WithCommitter). Durability is bbolt's default; NoSync is never used.
package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/groupcommit"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/idempotency"
)

const (
	bucketEvents             = "dispatch_events"
	bucketEventsByTenant     = "dispatch_events_by_tenant"
	bucketEndpoints          = "dispatch_endpoints"
	bucketEndpointsByTenant  = "dispatch_endpoints_by_tenant"
	bucketDeliveries         = "dispatch_deliveries"
	bucketDeliveriesByTarget = "dispatch_deliveries_by_endpoint"
	bucketQueue              = "dispatch_queue"
	bucketQueueHeads         = "dispatch_queue_heads"
	bucketQueueState         = "dispatch_queue_state"
	bucketLeases             = "dispatch_leases"
	bucketMeta               = "dispatch_meta"
)

var (
	bucketCredentials = "gw_credentials"
	bucketKeys        = "gw_signing_keys"
	bucketIdempotency = "gw_idempotency"
	bucketUsage       = "gw_usage"
	bucketUpstream    = "gw_upstream_state"
	bucketNotices     = "gw_notification_inbox"
	bucketNonces      = "gw_forward_nonces"
)

func bucketNames() []string {
	return []string{bucketCredentials, bucketKeys, bucketIdempotency, bucketUsage, bucketUpstream, bucketNotices, bucketNonces, bucketSecrets,
		bucketConnections, bucketAuthorizations, bucketConsentStarts,
		bucketReadModel, bucketCheckpoints, bucketRMLeases, bucketRMFences,
		bucketEvents, bucketEventsByTenant, bucketEndpoints, bucketEndpointsByTenant,
		bucketDeliveries, bucketDeliveriesByTarget, bucketQueue, bucketQueueHeads, bucketQueueState,
		bucketLeases, bucketMeta, bucketEventFeeds}
}

// Store is the embedded state. It implements every interface in
// dispatcher.Backends and the gateway's stores.
type Store struct {
	db  *bbolt.DB
	c   *groupcommit.Committer
	now func() time.Time
	// inFlight is how long an unanswered idempotency key stays reserved.
	inFlight time.Duration
	// secrets seals the generated signing key, endpoint secrets and
	// upstream state.
	secrets *sealed.Key
	reclaim bool
}

// Option changes New's defaults.
type Option func(*Store)

// WithInFlight sets how long an unanswered idempotency key stays reserved
// (default idempotency.InFlight); tests shorten it.
func WithInFlight(d time.Duration) Option { return func(s *Store) { s.inFlight = d } }

// WithCommitter makes the store's writes share c's commits: the
// committer of every writer of the file (default: one of the store's own).
func WithCommitter(c *groupcommit.Committer) Option { return func(s *Store) { s.c = c } }

// ReclaimLeases says the process opening the store is the file's only user
// (bbolt locks it to one process), so that every delivery lease found in it
// was held by a process that is gone: its deliveries are due again at
// once, rather than when their leases run out. A delivery handed to the
// delivery loop by its writer's transaction is leased from the start, until
// its attempt is recorded. Tests that open a second store on one file, as
// a second process, leave it out.
func ReclaimLeases() Option { return func(s *Store) { s.reclaim = true } }

// WithSecrets is the key that seals the generated signing key and
// endpoint secrets. Required.
func WithSecrets(k *sealed.Key) Option { return func(s *Store) { s.secrets = k } }

// New creates the store's buckets in db if they are missing, checks that
// its secrets are sealed under the WithSecrets key and seals those a
// version before sealing left in plain text; now is the clock that ages
// idempotency keys and usage (default time.Now). The caller opened db and
// closes it.
func New(db *bbolt.DB, now func() time.Time, opts ...Option) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	s := &Store{db: db, now: now, inFlight: idempotency.InFlight}
	for _, o := range opts {
		o(s)
	}
	if s.c == nil {
		s.c = groupcommit.New(db)
	}
	if s.secrets == nil {
		return nil, fmt.Errorf("bolt store: no secrets key (WithSecrets)")
	}
	err := db.Update(func(tx *bbolt.Tx) error {
		for _, name := range bucketNames() {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		// bbolt locks its file to one process, so a sync lease found here
		// was taken by a process that is gone (killed, say): waiting for
		// it to expire would only hold the restarted syncs back.
		if err := tx.DeleteBucket([]byte(bucketRMLeases)); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte(bucketRMLeases)); err != nil {
			return err
		}
		if s.reclaim {
			if err := openQueues(tx).expireLeases(time.Unix(1<<40, 0)); err != nil {
				return err
			}
		}
		// Tombstones live in the read model's own bucket now, beside
		// the records they replace; the separate bucket goes.
		if tx.Bucket([]byte("gw_readmodel_tombstones")) != nil {
			if err := tx.DeleteBucket([]byte("gw_readmodel_tombstones")); err != nil {
				return err
			}
		}
		// The previous version kept the notification bodies handled in
		// the last hour alone, not what they named; the inbox replaces it.
		if tx.Bucket([]byte("gw_notifications")) != nil {
			if err := tx.DeleteBucket([]byte("gw_notifications")); err != nil {
				return err
			}
		}
		// The previous version's feed numbered every tenant's events
		// together; its positions are refused now, so it goes.
		if tx.Bucket([]byte(bucketOldFeedName)) != nil {
			if err := tx.DeleteBucket([]byte(bucketOldFeedName)); err != nil {
				return err
			}
		}
		return prepareSecrets(tx, s.secrets)
	})
	if err != nil {
		return nil, fmt.Errorf("bolt store: %w", err)
	}
	return s, nil
}

// Backends wires the store in as all of the engine's backends.
func (s *Store) Backends() dispatcher.Backends {
	return dispatcher.Backends{Events: s, Endpoints: s, Catalog: s, Queue: s, Attempts: s, Deliveries: s, Pruner: s, Feed: s}
}

// view and update check ctx first: bbolt transactions cannot be
// interrupted, but a cancelled caller need not start one.
func (s *Store) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// update runs fn in a group commit (internal/groupcommit): fn may run more
// than once and must reset what it reports.
func (s *Store) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.c.Update(fn)
}

// attemptLinger is how long the record of a webhook attempt waits for
// another write's commit to join before it commits on its own
// (groupcommit.UpdateLazy). Nobody waits on it: the endpoint's request slot
// was freed when the endpoint answered, and the delivery stays leased
// meanwhile.
const attemptLinger = 5 * time.Millisecond

// updateLazy is update for a write nobody is waiting on.
func (s *Store) updateLazy(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.c.UpdateLazy(fn, attemptLinger)
}

// pageSize applies the default page size; the engine has already refused
// sizes out of range.
func pageSize(n int) int {
	if n <= 0 {
		return dispatcher.DefaultLimit
	}
	return min(n, dispatcher.MaxLimit)
}

func tenantKey(t practice.Tenant) []byte {
	mode := "live"
	if t.Sandbox {
		mode = "sandbox"
	}
	return []byte(t.Firm + "\x00" + mode + "\x00")
}

// timeKey is t as 8 sortable bytes; the zero time (and anything before
// 1970) sorts first.
func timeKey(t time.Time) []byte {
	var b [8]byte
	if !t.IsZero() && t.Unix() >= 0 {
		binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	}
	return b[:]
}

func keyTime(k []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))).UTC()
}

func concat(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func getJSON(b *bbolt.Bucket, key string, v any) (bool, error) {
	raw := b.Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, nil
}

// putJSON stores v in the records' encoding, so an event's payload comes
// back byte for byte as it went in.
func putJSON(b *bbolt.Bucket, key string, v any) error {
	raw, err := practice.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	return b.Put([]byte(key), raw)
}

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
