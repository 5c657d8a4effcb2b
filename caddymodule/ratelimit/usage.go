package ratelimit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/practicegw/practicegw/store/usage"
)

// retentionHours is how much hourly usage is kept (usage.Retention).
const retentionHours = int64(usage.Retention / time.Hour)

// UsageStore keeps hourly usage counts beyond this process's memory. The
// limiter adds to it in batches, never once per request. The embedded store
// implements it; MemoryUsage is the default when nothing else is given.
type UsageStore interface {
	// AddUsage adds to the counts of credentialID for the hour starting at
	// hour.
	AddUsage(ctx context.Context, credentialID string, hour time.Time, admitted, refused int64) error
	// Usage returns the counts of credentialID for every hour since the
	// hour holding since that has any, oldest first.
	Usage(ctx context.Context, credentialID string, since time.Time) ([]usage.Hour, error)
}

type hourKey struct {
	id   string
	hour int64 // unix hour
}

type counts struct{ admitted, refused int64 }

func (c *counts) add(o counts) { c.admitted += o.admitted; c.refused += o.refused }

// tally holds counts not yet written to a UsageStore. It is sharded like
// the buckets so that counting a request takes no process-wide lock.
type tally struct {
	shards [shardCount]tallyShard
}

type tallyShard struct {
	mu sync.Mutex
	m  map[hourKey]counts
}

func (t *tally) count(id string, now time.Time, allowed bool) {
	s := &t.shards[shardOf(id)]
	k := hourKey{id: id, hour: now.Unix() / 3600}
	s.mu.Lock()
	if s.m == nil {
		s.m = map[hourKey]counts{}
	}
	c := s.m[k]
	if allowed {
		c.admitted++
	} else {
		c.refused++
	}
	s.m[k] = c
	s.mu.Unlock()
}

// take empties the tally and returns what it held.
func (t *tally) take() map[hourKey]counts {
	out := map[hourKey]counts{}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		m := s.m
		s.m = nil
		s.mu.Unlock()
		for k, c := range m {
			out[k] = c
		}
	}
	return out
}

// putBack returns counts a store refused, dropping any past retention so a
// store that stays down cannot make the tally grow without end.
func (t *tally) putBack(m map[hourKey]counts, now time.Time) {
	oldest := now.Unix()/3600 - retentionHours
	for k, c := range m {
		if k.hour < oldest {
			continue
		}
		s := &t.shards[shardOf(k.id)]
		s.mu.Lock()
		if s.m == nil {
			s.m = map[hourKey]counts{}
		}
		cur := s.m[k]
		cur.add(c)
		s.m[k] = cur
		s.mu.Unlock()
	}
}

// of returns the tally's counts for one credential since a unix hour.
func (t *tally) of(id string, from int64) map[int64]counts {
	out := map[int64]counts{}
	s := &t.shards[shardOf(id)]
	s.mu.Lock()
	for k, c := range s.m {
		if k.id == id && k.hour >= from {
			cur := out[k.hour]
			cur.add(c)
			out[k.hour] = cur
		}
	}
	s.mu.Unlock()
	return out
}

// merge adds extra to a store's answer, keeping it ordered by hour.
func merge(stored []usage.Hour, extra map[int64]counts) []usage.Hour {
	if len(extra) == 0 {
		return stored
	}
	byHour := map[int64]counts{}
	for _, u := range stored {
		c := byHour[u.Hour.Unix()/3600]
		c.add(counts{u.Admitted, u.Refused})
		byHour[u.Hour.Unix()/3600] = c
	}
	for h, c := range extra {
		cur := byHour[h]
		cur.add(c)
		byHour[h] = cur
	}
	out := make([]usage.Hour, 0, len(byHour))
	for _, h := range slices.Sorted(maps.Keys(byHour)) {
		c := byHour[h]
		out = append(out, usage.Hour{Hour: time.Unix(h*3600, 0).UTC(), Admitted: c.admitted, Refused: c.refused})
	}
	return out
}

// Usage returns credentialID's requests per hour since the given time,
// oldest first, hours without requests left out. With Redis it covers
// every instance; without, this process and the UsageStore.
func (l *Limiter) Usage(ctx context.Context, credentialID string, since time.Time) ([]usage.Hour, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	stored, err := l.store.Usage(ctx, credentialID, since)
	if err != nil {
		return nil, fmt.Errorf("reading usage of %s: %w", credentialID, err)
	}
	return merge(stored, l.tally.of(credentialID, since.Unix()/3600)), nil
}

// flush writes the tally to the store, one call per credential and hour.
// It stops at the first failure, so a store that hangs costs one timeout,
// not one per credential; what was not written stays for the next flush.
func (l *Limiter) flush(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	pending := l.tally.take()
	defer func() { l.tally.putBack(pending, l.clock()) }()
	for k, c := range pending {
		wctx, cancel := context.WithTimeout(ctx, storeTimeout)
		err := l.store.AddUsage(wctx, k.id, time.Unix(k.hour*3600, 0).UTC(), c.admitted, c.refused)
		cancel()
		if err != nil {
			return fmt.Errorf("writing usage of %d credential-hours: %w", len(pending), err)
		}
		delete(pending, k)
	}
	return nil
}
