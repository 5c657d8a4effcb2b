package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// Endpoint returns the endpoint with id, secrets included.
func (s *Store) Endpoint(ctx context.Context, id string) (dispatcher.Endpoint, error) {
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	raw, err := s.rdb.Get(cctx, s.key("ep:", id)).Bytes()
	if isNil(err) {
		return dispatcher.Endpoint{}, fmt.Errorf("endpoint %s: %w", id, dispatcher.ErrNotFound)
	}
	if err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("endpoint %s: %w", id, err)
	}
	return s.decodeEndpoint(id, raw)
}

// Endpoints returns a tenant's endpoints in id order, which is creation
// order to the millisecond.
func (s *Store) Endpoints(ctx context.Context, t practice.Tenant) ([]dispatcher.Endpoint, error) {
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	ids, err := s.rdb.ZRange(cctx, s.key("eps:", tenantKey(t)), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("endpoints of %s: %w", t, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.key("ep:", id)
	}
	raws, err := s.rdb.MGet(cctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("endpoints of %s: %w", t, err)
	}
	eps := make([]dispatcher.Endpoint, 0, len(raws))
	for i, raw := range raws {
		str, ok := raw.(string)
		if !ok {
			continue // deleted between the two reads
		}
		ep, err := s.decodeEndpoint(ids[i], []byte(str))
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

// CreateEndpoint stores a new endpoint.
func (s *Store) CreateEndpoint(ctx context.Context, ep dispatcher.Endpoint) error {
	rec, err := s.encodeEndpoint(ep)
	if err != nil {
		return fmt.Errorf("create endpoint %s: %w", ep.ID, err)
	}
	res, err := s.run(ctx, s.scripts.createEndpoint, ep.ID, tenantKey(ep.Tenant()), rec)
	if err != nil {
		return fmt.Errorf("create endpoint %s: %w", ep.ID, err)
	}
	if n, _ := res.(int64); n == 0 {
		return fmt.Errorf("%w: endpoint %s exists", practice.ErrConflict, ep.ID)
	}
	return nil
}

// updateRetries bounds optimistic retries of an endpoint update that
// raced with another.
const updateRetries = 20

// UpdateEndpoint applies fn optimistically: it reads the endpoint under
// WATCH and writes it back only if nobody changed it meanwhile, else tries
// again. fn cannot move the endpoint to another id or tenant.
func (s *Store) UpdateEndpoint(ctx context.Context, id string, fn func(*dispatcher.Endpoint) error) (dispatcher.Endpoint, error) {
	key := s.key("ep:", id)
	var out dispatcher.Endpoint
	update := func(tx *goredis.Tx) error {
		cctx, cancel := s.ctx(ctx)
		defer cancel()
		raw, err := tx.Get(cctx, key).Bytes()
		if isNil(err) {
			return dispatcher.ErrNotFound
		}
		if err != nil {
			return err
		}
		ep, err := s.decodeEndpoint(id, raw)
		if err != nil {
			return err
		}
		orig := ep
		if err := fn(&ep); err != nil {
			return err
		}
		ep.ID, ep.Firm, ep.Sandbox, ep.CreatedAt = orig.ID, orig.Firm, orig.Sandbox, orig.CreatedAt
		rec, err := s.encodeEndpoint(ep)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(cctx, func(p goredis.Pipeliner) error {
			p.Set(cctx, key, rec, 0)
			return nil
		})
		out = ep
		return err
	}
	for range updateRetries {
		wctx, cancel := s.ctx(ctx)
		err := s.rdb.Watch(wctx, update, key)
		cancel()
		if errors.Is(err, goredis.TxFailedErr) {
			continue
		}
		if err != nil {
			return dispatcher.Endpoint{}, fmt.Errorf("update endpoint %s: %w", id, err)
		}
		return out, nil
	}
	return dispatcher.Endpoint{}, fmt.Errorf("update endpoint %s: changed concurrently %d times", id, updateRetries)
}

// deleteChunk bounds the deliveries one script deletes, so that deleting
// an endpoint with a long log does not block Redis.
const deleteChunk = 500

// DeleteEndpoint removes the endpoint and its queue in one step, then its
// deliveries in chunks. Once the first step is done nothing of the
// endpoint is claimed or queued again; if the process dies before the
// last chunk, the rest of its deliveries stay readable by id but belong to
// no endpoint, and deleting is not repeated (the endpoint is not found).
func (s *Store) DeleteEndpoint(ctx context.Context, id string) error {
	ep, err := s.Endpoint(ctx, id)
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", id, err)
	}
	first := "1"
	for {
		res, err := s.run(ctx, s.scripts.deleteEndpoint, id, tenantKey(ep.Tenant()), deleteChunk, first)
		if err != nil {
			return fmt.Errorf("delete endpoint %s: %w", id, err)
		}
		left, _ := res.(int64)
		if left < 0 {
			return fmt.Errorf("delete endpoint %s: %w", id, dispatcher.ErrNotFound)
		}
		if left == 0 {
			return nil
		}
		first = "0"
	}
}
