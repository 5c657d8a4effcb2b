package practice

import (
	"encoding/json"
	"time"
)

// Tombstone is what is left of a record removed from the firm's system:
// its id, when the removal was found and the version after the record's
// last one, so that a mirror that applies records by version applies the
// removal after every state it has seen. A collection listed with
// include_deleted answers tombstones among its records, and a
// <resource>.deleted event carries one as its object.
type Tombstone struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Deleted   bool      `json:"deleted"`
	DeletedAt time.Time `json:"deleted_at"`
	Version   int64     `json:"version"`
}

// TombstoneRetention is how long a removed record's tombstone is kept at
// least: a mirror that polls less often than this loads everything again.
const TombstoneRetention = 30 * 24 * time.Hour

// NewTombstone is the tombstone of record id of kind k, removed at at,
// whose last state was before (nil when unknown). The time is kept to the
// millisecond, as events' occurred_at is, so that the tombstone an event
// carries and the one a listing answers are the same bytes.
func NewTombstone(k Kind, id string, before json.RawMessage, at time.Time) Tombstone {
	var last struct {
		Version int64 `json:"version"`
	}
	_ = json.Unmarshal(before, &last)
	return Tombstone{ID: id, Object: k.Singular(), Deleted: true,
		DeletedAt: at.UTC().Truncate(time.Millisecond), Version: last.Version + 1}
}

// TombstoneQuery selects tombstones as a collection page selects records:
// after an id, in id order.
type TombstoneQuery struct {
	Since time.Time // zero: every tombstone kept
	After string    // "" from the first
	Limit int
}
