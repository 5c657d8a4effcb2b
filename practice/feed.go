package practice

import (
	"encoding/json"
	"errors"
	"time"
)

// ChangesPage is what a vendor's change feed reports since a position.
type ChangesPage struct {
	// Changed are the records added or changed, as /v1 JSON (documents here).
	Changed []json.RawMessage
	// Gone are the /v1 ids of records removed (deleted, trashed, moved out of scope).
	Gone []string
	// Next is the position to read from next time; it is never empty after a successful call.
	Next string
	// More says the vendor has more changes right away (call again with Next).
	More bool
	// Others are the changes of other kinds, where one feed covers
	// several (QuickBooks' change data capture: invoices and estimates);
	// Changed and Gone are the first kind's. A sync keeps those of the
	// kinds it owns.
	Others []KindChanges
}

// KindChanges are a feed page's changes of one kind beside its first.
type KindChanges struct {
	Kind    Kind
	Changed []json.RawMessage
	Gone    []string
}

// ErrFeedExpired means a change feed cannot go on from the position it was
// given: the vendor retired it, or what changed since cannot be told record
// by record (a folder removed whose files the vendor does not name). The
// caller reconciles from a full listing and starts the feed again from "".
var ErrFeedExpired = errors.New("change feed position expired")

// Freshness is how current a read model's records of a kind are, as its
// sync last saw; the API tells callers in headers.
type Freshness struct {
	// ConfirmedAt is when the records were last confirmed against the
	// vendor (zero until the backfill ends).
	ConfirmedAt time.Time
	// Backfilled says every record has been read at least once; until
	// then a record missing from the model is read from the vendor.
	Backfilled bool
	// State is the sync's: backfilling, live, lagging or failing.
	State string
	// Reason says in a few plain words why a failing copy is failing:
	// the gateway's words, never the vendor's or an error chain.
	Reason string
}
