package karbon

import (
	"encoding/json"
	"sync"
)

// detailCache keeps the /v1 JSON of records whose list entry does not carry
// everything (clients, users), keyed by id and the version Karbon lists
// for them (LastModifiedDateTime), so that paging through clients reads
// each one in full only when it changed. When full it forgets an
// arbitrary half, which is cheap and good enough for a cache of reads.
type detailCache struct {
	mu  sync.Mutex
	max int
	m   map[string]cached
}

type cached struct {
	version string
	raw     json.RawMessage
	// owner and status let filters run on a cached client without
	// decoding it.
	owner, status string
}

func newDetailCache(max int) *detailCache {
	return &detailCache{max: max, m: map[string]cached{}}
}

func (c *detailCache) get(id, version string) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || e.version != version {
		return cached{}, false
	}
	return e, true
}

func (c *detailCache) put(id string, e cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		n := 0
		for k := range c.m {
			delete(c.m, k)
			if n++; n >= c.max/2 {
				break
			}
		}
	}
	c.m[id] = e
}
