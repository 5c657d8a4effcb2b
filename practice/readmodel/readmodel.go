// Package readmodel keeps a synchronized copy of each firm's real systems
// (a practice-management system, a ledger, a document store) in the /v1
// shape, and serves /v1 reads from it, so that reads spend nothing of the
// vendors' small shared budgets and every filter costs the same as over
// the demo records.
//
// A Model holds one firm's records: in memory, indexed by
// practice/recordindex as the demo records are, and durable in a Store
// (bbolt embedded, Redis shared by every instance). It is also the
// "last state seen" of every record that change records are diffed
// against (changes.StateStore), so whichever way a change is noticed (a
// vendor webhook, a write through /v1, a poll, the change feed of a
// document store, a reconciliation) it is compared with the same copy and
// becomes exactly one change record.
//
// A Syncer keeps one firm system's part of the model current: a
// checkpointed backfill, the vendor's change feed where it has one,
// incremental polling with the vendor's modified-since filters, and a
// periodic reconciliation that finds deletions. It runs on one instance
// at a time per firm system, under a lease in the shared store; the others
// follow the model's UpdateFeed.
package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Update is one record's new state in a firm's read model; a nil Raw
// removes the record.
type Update struct {
	Kind practice.Kind
	ID   string
	Raw  json.RawMessage
	// At is when a removal was found, its tombstone's deleted_at (zero:
	// now). Stores do not keep it.
	At time.Time
	// ReadAt is when the read of Raw began (zero: unknown). It orders
	// states whose vendor publishes neither a version nor a modification
	// time that tells them apart: a state read before the one held is
	// older. An UpdateFeed carries it to the other instances; a Store need not
	// keep it.
	ReadAt time.Time
}

// Store keeps the read models durably, one per backend.
type Store interface {
	// Apply writes a firm's updates durably, in order.
	Apply(ctx context.Context, firm string, us []Update) error
	// Load calls fn with every record of the firm's model, in no order.
	Load(ctx context.Context, firm string, fn func(Update) error) error
}

// UpdateFeed is the order in which a shared Store took a firm's updates, so that
// every instance serving the firm applies what any other wrote. Only a
// store shared between processes has one (Redis): an embedded store is
// written by its one process alone.
type UpdateFeed interface {
	// Head is the position of the firm's newest update ("" when none).
	Head(ctx context.Context, firm string) (string, error)
	// Since returns at most n updates taken after pos, in order, and the
	// position of the last one (pos when there are none). A position the
	// store no longer keeps the updates after is ErrGap: the reader loads
	// the whole model again.
	Since(ctx context.Context, firm, pos string, n int) ([]Update, string, error)
}

// ErrGap means an UpdateFeed no longer has every update after a position.
var ErrGap = errors.New("read model feed: updates after this position were trimmed")

// Checkpoints keep each firm system's sync progress, where a restarted
// sync resumes and where every instance reads how fresh its data is.
type Checkpoints interface {
	// Checkpoint returns what was saved under name, nil when nothing was.
	Checkpoint(ctx context.Context, name string) ([]byte, error)
	SaveCheckpoint(ctx context.Context, name string, value []byte) error
	// SaveHeldCheckpoint saves value under name only if holder holds the
	// lease named lease (Leases) and it has not expired, checked in the
	// same atomic step as the write; false, with nothing saved, when it
	// does not. A sync step that ends after its lease was lost must not
	// save its progress over the new holder's.
	SaveHeldCheckpoint(ctx context.Context, name string, value []byte, lease, holder string) (bool, error)
}

// Leases let one instance at a time run a firm system's sync.
type Leases interface {
	// Lease takes name for holder, or renews it when holder has it, until
	// ttl from now; false when another holder's lease has not expired.
	Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// Release gives name up if holder has it, so another instance need not
	// wait for the lease to expire.
	Release(ctx context.Context, name, holder string) error
}

// ChangeFeed is a vendor's own feed of changes (Microsoft Graph delta,
// Google Drive's changes, Dropbox's list_folder/continue). A document
// store's adapter has one; the sync reads it instead of polling.
type ChangeFeed interface {
	// Changes reads the feed after cursor; "" starts it at the present
	// (no changes, only Next). An expired cursor is practice.ErrFeedExpired.
	Changes(ctx context.Context, t practice.Tenant, cursor string) (practice.ChangesPage, error)
}

// Incremental is an adapter that says which kinds its vendor can list by
// modification time cheaply: their polls ask for what changed since the
// last. The others (Karbon keeps no modification time on work items and
// users) are polled by listing every record, which costs every page, so
// the plan spaces them further apart; webhooks bring their changes
// sooner, but a lost webhook or subscription is found by the next poll.
// A reader without it filters every kind.
type Incremental interface {
	Incremental(k practice.Kind) bool
}

// Fence is what a write of a firm's copy is fenced by: a writer of
// generation Generation under Name (a connection: a new consent or
// organisation is a new generation) is refused once the store's fence of
// Name was raised past it. An instance that missed a whole reconnect to
// another organisation can so not write the old one's records after the
// purge.
type Fence struct {
	Firm, Name string
	Generation int64
}

// ErrFenced is a write refused by its fence: the connection it was made
// for has moved to another generation since.
var ErrFenced = errors.New("read model write refused: its connection moved on")

// FencedState is an upstream state store whose writes a Fence guards
// (the fences are the read model store's), checked in the same atomic
// step as the write: a stale instance's adapter saves no first-seen stamp
// or token of the organisation left.
type FencedState interface {
	// SaveFenced is Save, taken only while f.Generation is not below the
	// fence; ErrFenced, with nothing saved, otherwise.
	SaveFenced(ctx context.Context, f Fence, key string, state []byte) error
}

// FencedSwapper is an upstream state store whose swaps (changes.Swapper)
// a Fence guards, checked in the same atomic step as the swap.
type FencedSwapper interface {
	// SwapFenced is Swap, taken only while f.Generation is not below the
	// fence; ErrFenced, with nothing saved, otherwise.
	SwapFenced(ctx context.Context, f Fence, key string, old, state []byte) (bool, error)
}

// Fencer is a Store whose writes a Fence guards, checked in the same
// atomic step as the write.
type Fencer interface {
	// RaiseFence raises f.Name's fence to f.Generation (never lowers it):
	// from now on writes of an older generation are ErrFenced.
	RaiseFence(ctx context.Context, f Fence) error
	// ApplyFenced is Apply (after nil) or ApplyAfter (*after the head),
	// taken only while f.Generation is not below the fence; ErrFenced,
	// with nothing written, otherwise.
	ApplyFenced(ctx context.Context, f Fence, after *string, us []Update) (next string, ok bool, err error)
	// SaveFencedCheckpoint is SaveHeldCheckpoint, taken only while
	// f.Generation is not below the fence; ErrFenced otherwise.
	SaveFencedCheckpoint(ctx context.Context, f Fence, name string, value []byte, lease, holder string) (bool, error)
}
