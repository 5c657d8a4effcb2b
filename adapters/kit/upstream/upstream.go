// Package upstream is what every adapter puts between itself and a vendor's
// API: a per-call timeout, retries with backoff for idempotent reads, the
// vendor's 429 and Retry-After honoured, a request budget against the
// vendor's published limits (shared across instances through Redis when one
// is given), a circuit breaker per upstream and Prometheus metrics, and the
// Deps an adapter's constructor takes. What adapters share beyond single
// calls has its own package: paging (vendor page walks and cursors),
// changes (change records from what was read), oauthtoken (OAuth2 bearer
// tokens), webhooksig (webhook signatures).
//
// Errors follow the practice package: an unreachable, failing, rate-limited
// or breaker-guarded upstream is an *UnavailableError (errors.Is
// practice.ErrUnavailable) carrying how long to wait; an unreadable answer
// wraps practice.ErrBadUpstream; a 404 wraps practice.ErrNotFound and a 409
// practice.ErrConflict.
package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Deps are what an adapter's constructor takes besides its configuration.
// Every field is optional.
type Deps struct {
	// Logger receives warnings about upstreams; nil logs nothing.
	Logger *zap.Logger
	// Budget shares request budgets between instances; nil keeps them in
	// this process (NewLocalBudget). Use store/redis.NewBudget when several
	// gateways call the same vendor account.
	Budget Budget
	// Clock tells time and sleeps for backoff and budget waits; nil is the
	// system clock. Tests inject one that does not sleep.
	Clock Clock
	// Registerer receives the upstream metrics; nil registers nothing (the
	// metrics are still counted, just not exported).
	Registerer prometheus.Registerer
	// State remembers the last state seen of upstream records, to make
	// change records from webhooks, and OAuth2 refresh tokens that a
	// vendor rotates; nil keeps both in memory (changes.NewMemoryState).
	State changes.StateStore
	// Notifications keeps the vendor's verified notifications until what
	// they name is read, and the bodies kept in the last hour, so that one
	// posted again is not read again (shared through Redis when
	// configured); nil keeps them in this adapter's memory.
	Notifications notifications.Inbox
	// Wake tells the sync of the system these deps open, on whichever
	// instance holds it, that its vendor notified: notifications are kept
	// for it to read, or its change feed has news. Nil when no sync reads
	// them: a delivery then reads all it kept before it is answered.
	Wake func(ctx context.Context) error
	// Heard is told, for each change record a vendor's notification led
	// to, when the notification came: the latency the sync's status
	// shows. Nil tells no one.
	Heard func(at time.Time)
	// Changes receives the change records of writes made through an
	// adapter (a job moved with POST /v1/jobs/{id}/stage), with the
	// write's note; the vendor's webhook for the same change then finds
	// nothing new. Nil leaves change records to the webhooks alone.
	Changes changes.ChangeSink
	// Recorder turns what the adapter reads and writes into change
	// records; one per firm, shared by its systems and its read model's
	// sync, so that a change noticed twice (a webhook and a poll) is
	// compared with one state under one lock. Nil builds one on State.
	Recorder *changes.Recorder
	// Transport replaces the HTTP transport of every client made with
	// these deps (a simulation serving the vendor doubles in process);
	// nil is a clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Instance tells apart two adapters of the same system in metric
	// labels, for example the firm id: the upstream label becomes
	// "karbon/frm_acme". Empty leaves the system name alone.
	Instance string
	// Locks keeps two gateway instances from refreshing one OAuth2
	// connection at once (package oauthtoken); nil leaves that to the
	// token source's own mutex, which is enough for one process.
	Locks Locks
	// GrantRefused, when set, is told that the vendor refused the
	// grant a connection's tokens come from (OAuth2 invalid_grant:
	// revoked, expired unused, app removed), with a reason in the
	// gateway's words. The gateway then marks the firm's connection
	// needs_reconnect and pauses its sync. Nil tells no one.
	GrantRefused func(reason string)
}

// Locks are named, expiring leases shared by every gateway instance on one
// store. A vendor that rotates refresh tokens (Xero, Microsoft, Dropbox)
// invalidates the older one, so a refresh must be done by one instance at
// a time; a holder that dies leaves a lease that expires after ttl.
// store/bolt and store/redis implement it (the read model's leases).
type Locks interface {
	// Lease takes name for holder, or renews it when holder has it, until
	// ttl from now; false when another holder's lease has not expired.
	Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// Release gives name up if holder has it.
	Release(ctx context.Context, name, holder string) error
}

func (d Deps) logger() *zap.Logger {
	if d.Logger == nil {
		return zap.NewNop()
	}
	return d.Logger
}

func (d Deps) state() changes.StateStore {
	if d.State == nil {
		return changes.NewMemoryState()
	}
	return d.State
}

// StateStore returns Deps.State, or a new in-memory store when it is nil.
func (d Deps) StateStore() changes.StateStore { return d.state() }

// NotificationInbox returns Deps.Notifications, or a new inbox in this
// process's memory when it is nil: an adapter takes it once, in New.
func (d Deps) NotificationInbox() notifications.Inbox {
	if d.Notifications == nil {
		return notifications.NewMemory(nil)
	}
	return d.Notifications
}

// ChangeRecorder returns Deps.Recorder, or a new one on StateStore().
func (d Deps) ChangeRecorder() *changes.Recorder {
	if d.Recorder != nil {
		return d.Recorder
	}
	return &changes.Recorder{State: d.state(), Clock: d.clock()}
}

// ClockOrSystem returns Deps.Clock, or the system clock when it is nil.
func (d Deps) ClockOrSystem() Clock { return d.clock() }

// LoggerOrNop returns Deps.Logger, or one that logs nothing.
func (d Deps) LoggerOrNop() *zap.Logger { return d.logger() }

func (d Deps) clock() Clock {
	if d.Clock == nil {
		return SystemClock{}
	}
	return d.Clock
}

// Label is the upstream label for system under these deps.
func (d Deps) Label(system string) string {
	if d.Instance == "" {
		return system
	}
	return system + "/" + d.Instance
}

// Clock is the time source of an upstream client. Sleep returns early with
// ctx's error when ctx ends.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is real time.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Duration is a time.Duration that reads from JSON either as a Go duration
// string ("10s", "1m30s") or as integer nanoseconds, the way Caddy's own
// durations do, so the Caddyfile wiring can pass caddy.Duration values
// through unchanged.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"10s\" or integer nanoseconds", b)
	}
	*d = Duration(n)
	return nil
}

// Policy is the resilience of one upstream. Zero fields take the default
// in brackets, or the vendor's own default where the adapter has one (the
// request budget).
type Policy struct {
	// Timeout bounds one attempt, connecting to reading the whole body [10s].
	Timeout Duration `json:"timeout,omitempty"`
	// MaxAttempts is how often an idempotent read is tried [3]. Writes are
	// tried once, except after a 429, which the vendor answers before doing
	// anything.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// BackoffBase is the first retry's delay; each later one doubles it,
	// with full jitter [200ms], capped at BackoffMax [2s].
	BackoffBase Duration `json:"backoff_base,omitempty"`
	BackoffMax  Duration `json:"backoff_max,omitempty"`
	// MaxRetryWait is the longest Retry-After (or budget wait) a call sits
	// out before answering; a longer one fails the call at once with an
	// UnavailableError carrying the wait [5s].
	MaxRetryWait Duration `json:"max_retry_wait,omitempty"`
	// BreakerFailures consecutive failures (5xx, 429, timeouts, connection
	// errors) open the breaker [5]; other 4xx never count.
	BreakerFailures int `json:"breaker_failures,omitempty"`
	// BreakerTimeout is how long the breaker stays open before letting one
	// trial call through [30s].
	BreakerTimeout Duration `json:"breaker_timeout,omitempty"`
	// RateLimit requests per RatePeriod are allowed against the vendor
	// account [the vendor's published limit: Karbon 120/min, Xero 60/min,
	// Graph, Drive and Dropbox 600/min]. Negative turns the budget off.
	RateLimit  int      `json:"rate_limit,omitempty"`
	RatePeriod Duration `json:"rate_period,omitempty"`
	// DailyLimit replaces the vendor's published calls a day per account
	// [Xero and Xero Practice Manager: 5,000 per organisation; none for
	// the others], for an account on other terms (or a test double). The
	// read model's sync plans its polls from it. Negative turns it off.
	DailyLimit int `json:"daily_limit,omitempty"`
	// MaxBodyBytes caps a response body [16 MiB]; a larger one is a bad
	// upstream answer rather than unbounded memory.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
}

// withDefaults fills zero fields; vendor supplies the budget default.
func (p Policy) withDefaults(vendor Policy) Policy {
	def := func(v *Duration, vendor, d time.Duration) {
		if *v == 0 {
			*v = Duration(vendor)
		}
		if *v == 0 {
			*v = Duration(d)
		}
	}
	def(&p.Timeout, time.Duration(vendor.Timeout), 10*time.Second)
	def(&p.BackoffBase, time.Duration(vendor.BackoffBase), 200*time.Millisecond)
	def(&p.BackoffMax, time.Duration(vendor.BackoffMax), 2*time.Second)
	def(&p.MaxRetryWait, time.Duration(vendor.MaxRetryWait), 5*time.Second)
	def(&p.BreakerTimeout, time.Duration(vendor.BreakerTimeout), 30*time.Second)
	def(&p.RatePeriod, time.Duration(vendor.RatePeriod), time.Minute)
	defInt := func(v *int, vendor, d int) {
		if *v == 0 {
			*v = vendor
		}
		if *v == 0 {
			*v = d
		}
	}
	defInt(&p.MaxAttempts, vendor.MaxAttempts, 3)
	defInt(&p.BreakerFailures, vendor.BreakerFailures, 5)
	defInt(&p.RateLimit, vendor.RateLimit, 600)
	p.MaxAttempts = max(p.MaxAttempts, 1)
	p.BreakerFailures = max(p.BreakerFailures, 1)
	if p.MaxBodyBytes <= 0 {
		p.MaxBodyBytes = 16 << 20
	}
	return p
}
