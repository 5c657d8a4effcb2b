package readmodelsim

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// Store is a shared read model store in memory: the records, the feed
// (positions are sequence numbers, trimmed on demand as Redis trims its
// stream), checkpoints and leases by an injected clock. It passes the
// store conformance suites, so a simulation over it shows what the sync
// does over bbolt and Redis.
type Store struct {
	mu          sync.Mutex
	now         func() time.Time
	records     map[string]map[string][]byte // firm -> kind/id -> raw
	feeds       map[string]*feed
	checkpoints map[string][]byte
	leases      map[string]lease
}

type feed struct {
	entries []readmodel.Update
	// first is the sequence number of entries[0]; last of the newest
	// update ever added (trimmed or not).
	first, last uint64
}

type lease struct {
	holder  string
	expires time.Time
}

// NewStore makes an empty store on the clock now (nil is time.Now).
func NewStore(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, records: map[string]map[string][]byte{}, feeds: map[string]*feed{},
		checkpoints: map[string][]byte{}, leases: map[string]lease{}}
}

func recKey(u readmodel.Update) string { return string(u.Kind) + "/" + u.ID }

// Apply implements readmodel.Store.
func (s *Store) Apply(ctx context.Context, firm string, us []readmodel.Update) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyLocked(firm, us)
	return nil
}

// ApplyAfter writes us only if the firm's newest feed position is still
// head, as the Redis store's WATCH does.
func (s *Store) ApplyAfter(ctx context.Context, firm, head string, us []readmodel.Update) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := ""
	if f := s.feeds[firm]; f != nil && f.last != 0 {
		cur = strconv.FormatUint(f.last, 10)
	}
	if cur != head {
		return "", false, nil
	}
	s.applyLocked(firm, us)
	return strconv.FormatUint(s.feedOf(firm).last, 10), true, nil
}

func (s *Store) applyLocked(firm string, us []readmodel.Update) {
	recs := s.records[firm]
	if recs == nil {
		recs = map[string][]byte{}
		s.records[firm] = recs
	}
	f := s.feedOf(firm)
	for _, u := range us {
		u.Raw = bytes.Clone(u.Raw)
		if u.Raw == nil {
			delete(recs, recKey(u))
		} else {
			recs[recKey(u)] = u.Raw
		}
		if len(f.entries) == 0 {
			f.first = f.last + 1
		}
		f.entries = append(f.entries, u)
		f.last++
	}
}

func (s *Store) feedOf(firm string) *feed {
	f := s.feeds[firm]
	if f == nil {
		f = &feed{first: 1}
		s.feeds[firm] = f
	}
	return f
}

// Load implements readmodel.Store.
func (s *Store) Load(ctx context.Context, firm string, fn func(readmodel.Update) error) error {
	s.mu.Lock()
	var us []readmodel.Update
	for key, raw := range s.records[firm] {
		kind, id, _ := cut(key)
		us = append(us, readmodel.Update{Kind: kind, ID: id, Raw: bytes.Clone(raw)})
	}
	s.mu.Unlock()
	for _, u := range us {
		if err := fn(u); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Head implements readmodel.UpdateFeed.
func (s *Store) Head(ctx context.Context, firm string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.feeds[firm]
	if f == nil || f.last == 0 {
		return "", nil
	}
	return strconv.FormatUint(f.last, 10), ctx.Err()
}

// Since implements readmodel.UpdateFeed.
func (s *Store) Since(ctx context.Context, firm, pos string, n int) ([]readmodel.Update, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, pos, err
	}
	var at uint64
	if pos != "" {
		var err error
		if at, err = strconv.ParseUint(pos, 10, 64); err != nil {
			return nil, pos, fmt.Errorf("%w: %q is not a position", readmodel.ErrGap, pos)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.feeds[firm]
	if f == nil {
		if at != 0 {
			return nil, pos, fmt.Errorf("%w: no feed", readmodel.ErrGap)
		}
		return nil, pos, nil
	}
	if at > f.last || at+1 < f.first {
		return nil, pos, fmt.Errorf("%w: %s's feed was trimmed past %s", readmodel.ErrGap, firm, pos)
	}
	if n <= 0 {
		n = 1000
	}
	i := int(at + 1 - f.first)
	end := min(i+n, len(f.entries))
	if i >= end {
		return nil, pos, nil
	}
	out := make([]readmodel.Update, end-i)
	for j, u := range f.entries[i:end] {
		u.Raw = bytes.Clone(u.Raw)
		out[j] = u
	}
	return out, strconv.FormatUint(f.first+uint64(end)-1, 10), nil
}

// Trim drops all but the newest keep updates of the firm's feed.
func (s *Store) Trim(firm string, keep int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.feedOf(firm)
	if drop := len(f.entries) - keep; drop > 0 {
		f.entries = append([]readmodel.Update(nil), f.entries[drop:]...)
		f.first += uint64(drop)
	}
}

// Checkpoint implements readmodel.Checkpoints.
func (s *Store) Checkpoint(ctx context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.checkpoints[name]
	if !ok {
		return nil, ctx.Err()
	}
	return append([]byte{}, v...), ctx.Err()
}

// SaveCheckpoint implements readmodel.Checkpoints.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpoints[name] = append([]byte{}, value...)
	return ctx.Err()
}

// SaveHeldCheckpoint implements readmodel.Checkpoints.
func (s *Store) SaveHeldCheckpoint(ctx context.Context, name string, value []byte, lease, holder string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.leases[lease]
	if holder == "" || cur.holder != holder || !s.now().Before(cur.expires) {
		return false, ctx.Err()
	}
	s.checkpoints[name] = append([]byte{}, value...)
	return true, ctx.Err()
}

// Lease implements readmodel.Leases.
func (s *Store) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if holder == "" || ttl < time.Millisecond {
		return false, fmt.Errorf("lease %s: a holder and a ttl of at least 1ms are required", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cur := s.leases[name]
	if cur.holder != "" && cur.holder != holder && now.Before(cur.expires) {
		return false, ctx.Err()
	}
	s.leases[name] = lease{holder: holder, expires: now.Add(ttl.Truncate(time.Millisecond))}
	return true, ctx.Err()
}

// Release implements readmodel.Leases.
func (s *Store) Release(ctx context.Context, name, holder string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[name].holder == holder {
		delete(s.leases, name)
	}
	return ctx.Err()
}

var (
	_ readmodel.Store       = (*Store)(nil)
	_ readmodel.UpdateFeed  = (*Store)(nil)
	_ readmodel.Checkpoints = (*Store)(nil)
	_ readmodel.Leases      = (*Store)(nil)
)

func cut(key string) (practice.Kind, string, bool) {
	for i := range len(key) {
		if key[i] == '/' {
			return practice.Kind(key[:i]), key[i+1:], true
		}
	}
	return "", key, false
}
