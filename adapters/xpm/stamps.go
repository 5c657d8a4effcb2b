package xpm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// XPM publishes no modification time on any record, so the gateway keeps
// one: a record's updated_at is when a gateway first read it as it now
// is, its created_at when a gateway first read it at all, and its version
// that time in milliseconds. Stamps live in the upstream state store,
// which gateways share in scale-out, so every instance answers the same
// times; a record that changes and changes back is stamped again.

// stamp is what the state store keeps of one record.
type stamp struct {
	Digest string    `json:"d"`
	First  time.Time `json:"f"`
	At     time.Time `json:"a"`
}

// stampsPrefix is the prefix of the keys firm's stamps of k are kept
// under in the upstream state store.
func stampsPrefix(firm string, k practice.Kind) string {
	return "xpm/seen/" + changes.StateKey(practice.Tenant{Firm: firm}, k, "")
}

// stamps reads and writes stamps, one record at a time in this process.
type stamps struct {
	state changes.StateStore
	clock upstream.Clock
	firm  string

	locks [64]sync.Mutex
	seed  maphash.Seed
}

func newStamps(state changes.StateStore, clock upstream.Clock, firm string) *stamps {
	return &stamps{state: state, clock: clock, firm: firm, seed: maphash.MakeSeed()}
}

// of returns the stamp of a record whose content, without its times, is
// content: the saved one when the content is the same, else a new one
// saved now. The new time is after the old, so versions only rise.
func (s *stamps) of(ctx context.Context, k practice.Kind, id string, content any) (stamp, error) {
	b, err := json.Marshal(content)
	if err != nil {
		return stamp{}, fmt.Errorf("xpm: digest %s: %w", id, err)
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:12])
	key := stampsPrefix(s.firm, k) + id
	mu := &s.locks[maphash.String(s.seed, key)%uint64(len(s.locks))]
	mu.Lock()
	defer mu.Unlock()
	raw, err := s.state.Last(ctx, key)
	if err != nil {
		return stamp{}, fmt.Errorf("xpm: stamp of %s: %w", id, err)
	}
	var old stamp
	if raw != nil && json.Unmarshal(raw, &old) == nil && old.Digest == digest {
		return old, nil
	}
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	if !now.After(old.At) {
		now = old.At.Add(time.Millisecond)
	}
	st := stamp{Digest: digest, First: old.First, At: now}
	if st.First.IsZero() {
		st.First = now
	}
	b, _ = json.Marshal(st)
	if err := s.state.Save(ctx, key, b); err != nil {
		return stamp{}, fmt.Errorf("xpm: save stamp of %s: %w", id, err)
	}
	return st, nil
}
