package dispatcher

import (
	"context"
	"sync"
	"time"
)

// endpointTTL is how long an attempt may use an endpoint read by an
// earlier one. Changes this engine makes (disable on 410, the API's
// updates, rotation, deletion) drop the entry at once; changes another
// process makes (a gateway beside a standalone dispatcher) are seen within
// this long, as credential revocations are.
const endpointTTL = time.Second

// endpointCache spares a busy endpoint's attempts one store read each: in
// Redis mode that read was a third of an attempt's round trips.
type endpointCache struct {
	mu sync.Mutex
	m  map[string]cachedEndpoint
}

type cachedEndpoint struct {
	ep Endpoint
	at time.Time
}

// endpoint returns the endpoint for an attempt, from the cache if fresh.
func (e *Engine) endpoint(ctx context.Context, id string) (Endpoint, error) {
	c := &e.epCache
	now := time.Now()
	c.mu.Lock()
	if hit, ok := c.m[id]; ok && now.Sub(hit.at) < endpointTTL {
		c.mu.Unlock()
		return hit.ep, nil
	}
	c.mu.Unlock()
	ep, err := e.b.Endpoints.Endpoint(ctx, id)
	if err != nil {
		return ep, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > 4096 {
		// Stale entries are dropped wholesale now and then rather than
		// tracked: a miss costs one read.
		c.m = make(map[string]cachedEndpoint)
	}
	c.m[id] = cachedEndpoint{ep: ep, at: now}
	return ep, nil
}

// forgetEndpoint drops an endpoint this engine just changed.
func (e *Engine) forgetEndpoint(id string) {
	e.epCache.mu.Lock()
	delete(e.epCache.m, id)
	e.epCache.mu.Unlock()
}
