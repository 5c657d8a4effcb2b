// Package stamps keeps a modification time for the records whose vendor
// publishes none (Xero Practice Manager's records, Karbon's work items and
// users), so that their version and updated_at move on every change /v1
// shows, as every other record's do.
//
// A record's stamp is a digest of its content (what /v1 shows of it,
// without its times) and when a gateway first read that content: its
// updated_at, and in milliseconds its version. Stamps live in the
// upstream state store, which gateways share in scale-out and which
// survives restarts, so every instance answers the same times. A new
// stamp is saved only over the one its time was worked out from (a
// compare-and-save, changes.Swap), so two instances that read the same
// change at once agree on one stamp, and a new time is always after the
// one before: versions only rise, and a record that changes and changes
// back is stamped again.
package stamps

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Stamp is what the state store keeps of one record.
type Stamp struct {
	// Digest is of the content stamped.
	Digest string `json:"d"`
	// First is when a gateway first read the record at all.
	First time.Time `json:"f"`
	// At is when a gateway first read the content: the record's
	// updated_at.
	At time.Time `json:"a"`
	// Read is when the read that saw the content began, when its reader
	// said: a read begun before it that saw other content is older.
	Read time.Time `json:"r,omitzero"`
	// Vendor is the modification time the vendor published with the
	// content, for a record whose vendor publishes one (Read.Vendor).
	Vendor time.Time `json:"v,omitzero"`
}

// Version is the record's version: At in milliseconds.
func (s Stamp) Version() int64 { return practice.VersionAt(s.At) }

// Clock tells the time stamps are taken at.
type Clock interface{ Now() time.Time }

// gap is the least step between two stamps of a record, two milliseconds:
// a read found older than the stamp (Of) is answered a millisecond
// before it, which is then after every stamp before it.
const gap = 2 * time.Millisecond

// attempts bounds how often Of reads again after another instance
// stamped the record between its read and its save.
const attempts = 16

// ErrContended is a stamp that could not be saved because other
// instances kept stamping the record in between, attempts times over.
var ErrContended = errors.New("stamp: the record is stamped elsewhere too often to save")

// Store reads and writes the stamps of one firm's records of one system.
// It is safe for concurrent use; in this process one read of a record
// stamps it at a time, so only other instances contend.
type Store struct {
	state  changes.StateStore
	clock  Clock
	system string
	firm   string

	locks [64]sync.Mutex
	seed  maphash.Seed
}

// New makes the store of firm's stamps of system ("xpm", "karbon") in
// state: the upstream state store the gateway gives the system's adapter
// (a connection's read model, which fences what it saves).
func New(state changes.StateStore, clock Clock, system, firm string) *Store {
	return &Store{state: state, clock: clock, system: system, firm: firm, seed: maphash.MakeSeed()}
}

// Prefix is the prefix of the keys system's stamps of firm's records of
// kind k are kept under: what a connection's purge forgets, so that the
// next organisation's records are stamped when first seen there.
func Prefix(system, firm string, k practice.Kind) string {
	return system + "/seen/" + changes.StateKey(practice.Tenant{Firm: firm}, k, "")
}

// Digest is the digest of a record's content as a stamp keeps it.
func Digest(content any) (string, error) {
	b, err := json.Marshal(content)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// Read is one record as an adapter just read it.
type Read struct {
	Kind practice.Kind
	ID   string
	// Content is what /v1 shows of the record, without its times.
	Content any
	// Began is when the read began; zero when not known.
	Began time.Time
	// After, for a record never stamped, is a time its first stamp is
	// later than: the version the record carried before the gateway
	// stamped its kind, so that the first stamp does not go back from it.
	After time.Time
	// Vendor is the modification time the vendor publishes on the
	// record, for one that has one but shows content the vendor does not
	// date (a client linked from another system, a payment read apart):
	// the stamp is the vendor's time while it moves with the content, a
	// content read with an older vendor time is older (answered with
	// that time, nothing saved), and a change under the same vendor time
	// is stamped when first read, after the stamp before.
	Vendor time.Time
}

// Of returns the stamp of r: the one saved when the content is the same;
// else a new one, saved now, after the one saved. A read begun before the
// one that made the saved stamp, seeing other content, saw an older
// state: it is answered a time just before the saved stamp's, and
// nothing is saved, so that the newer state is never replaced by it (the
// read model drops an observation older than the state it holds).
func (s *Store) Of(ctx context.Context, r Read) (Stamp, error) {
	k, id, content, readAt := r.Kind, r.ID, r.Content, r.Began
	digest, err := Digest(content)
	if err != nil {
		return Stamp{}, fmt.Errorf("%s: digest of %s: %w", s.system, id, err)
	}
	key := Prefix(s.system, s.firm, k) + id
	mu := &s.locks[maphash.String(s.seed, key)%uint64(len(s.locks))]
	mu.Lock()
	defer mu.Unlock()
	for range attempts {
		raw, err := s.state.Last(ctx, key)
		if err != nil {
			return Stamp{}, fmt.Errorf("%s: stamp of %s: %w", s.system, id, err)
		}
		var old Stamp
		if raw != nil && json.Unmarshal(raw, &old) != nil {
			// Not a stamp this package wrote: stamped anew over it.
			old = Stamp{}
		}
		if old.Digest == digest && !old.At.IsZero() {
			return old, nil
		}
		vendor := r.Vendor.UTC().Truncate(time.Millisecond)
		if !old.At.IsZero() && !r.Vendor.IsZero() && vendor.Before(old.Vendor) {
			// The vendor dates it before the content stamped.
			return Stamp{Digest: digest, First: old.First, At: vendor, Read: readAt, Vendor: vendor}, nil
		}
		sameVendorTime := r.Vendor.IsZero() || vendor.Equal(old.Vendor)
		if !old.At.IsZero() && sameVendorTime && !readAt.IsZero() && readAt.Before(old.Read) {
			return Stamp{Digest: digest, First: old.First, At: old.At.Add(-gap / 2), Read: readAt, Vendor: old.Vendor}, nil
		}
		st := s.next(old, digest, readAt, r.After)
		if !r.Vendor.IsZero() {
			st.Vendor = vendor
			if old.At.IsZero() || vendor.After(old.At) {
				// The vendor's time, as long as it moves with the
				// content.
				st.At = vendor
				if st.First.IsZero() || old.At.IsZero() {
					st.First = vendor
				}
			}
		}
		b, err := json.Marshal(st)
		if err != nil {
			return Stamp{}, fmt.Errorf("%s: stamp of %s: %w", s.system, id, err)
		}
		saved, err := changes.Swap(ctx, s.state, key, raw, b)
		if err != nil {
			return Stamp{}, fmt.Errorf("%s: save stamp of %s: %w", s.system, id, err)
		}
		if saved {
			return st, nil
		}
		// Another instance stamped it meanwhile: its stamp is read
		// again, and taken when it stamped the same content.
		if err := ctx.Err(); err != nil {
			return Stamp{}, err
		}
	}
	return Stamp{}, fmt.Errorf("%s: stamp of %s: %w", s.system, id, ErrContended)
}

// next is the stamp of content digest read at readAt after old: now, or
// gap after old's time when the clock is not past it (another instance's
// clock ahead of this one's), or gap after after for a first stamp.
func (s *Store) next(old Stamp, digest string, readAt, after time.Time) Stamp {
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	if old.At.IsZero() {
		old.At = after.UTC().Truncate(time.Millisecond)
	}
	if !old.At.IsZero() && now.Before(old.At.Add(gap)) {
		now = old.At.Add(gap)
	}
	st := Stamp{Digest: digest, First: old.First, At: now, Read: readAt.UTC()}
	if readAt.IsZero() {
		st.Read = time.Time{}
	}
	if st.First.IsZero() {
		st.First = now
	}
	return st
}
