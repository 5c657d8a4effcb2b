package ratelimit

import (
	"sync"

	"github.com/practicegw/practicegw/internal/gcra"
)

// shardCount spreads credentials over locks so that concurrent requests of
// different credentials rarely wait for each other.
const shardCount = 64

// shardOf hashes with FNV-1a: credential ids are issued by the gateway, not
// chosen by clients, so a keyed hash would buy nothing here.
func shardOf(id string) int {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h % shardCount)
}

// buckets is GCRA in this process: each credential's TAT in a sharded map.
// An entry whose TAT has passed describes a full bucket, the same as no
// entry, so sweep drops it; memory is bounded by the credentials active
// within one window.
type buckets struct {
	shards [shardCount]bucketShard
}

type bucketShard struct {
	mu   sync.Mutex
	tats map[string]int64 // microseconds since the epoch
}

func (b *buckets) decide(id string, c gcra.Cell, now int64, consume bool) Decision {
	s := &b.shards[shardOf(id)]
	s.mu.Lock()
	defer s.mu.Unlock()
	next, d := step(c, s.tats[id], now, consume)
	if consume && d.Allowed {
		if s.tats == nil {
			s.tats = map[string]int64{}
		}
		s.tats[id] = next
	}
	return d
}

// follow records a TAT learned from Redis, so that if Redis goes away the
// local fallback carries on from where the shared bucket stood instead of
// handing every credential a fresh burst.
func (b *buckets) follow(id string, tat int64) {
	s := &b.shards[shardOf(id)]
	s.mu.Lock()
	if s.tats == nil {
		s.tats = map[string]int64{}
	}
	s.tats[id] = tat
	s.mu.Unlock()
}

// sweep forgets buckets that are full again.
func (b *buckets) sweep(now int64) {
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for id, tat := range s.tats {
			if tat <= now {
				delete(s.tats, id)
			}
		}
		s.mu.Unlock()
	}
}

// size is the number of buckets held, for tests of the bound.
func (b *buckets) size() int {
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		n += len(s.tats)
		s.mu.Unlock()
	}
	return n
}
