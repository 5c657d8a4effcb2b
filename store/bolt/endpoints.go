package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

func (s *Store) loadEndpoint(tx *bbolt.Tx, id string) (dispatcher.Endpoint, error) {
	var rec endpointRecord
	ok, err := getJSON(tx.Bucket([]byte(bucketEndpoints)), id, &rec)
	if err != nil {
		return dispatcher.Endpoint{}, err
	}
	if !ok {
		return dispatcher.Endpoint{}, dispatcher.ErrNotFound
	}
	return rec.open(s.secrets, id)
}

// Endpoint returns the endpoint with id, secrets included.
func (s *Store) Endpoint(ctx context.Context, id string) (dispatcher.Endpoint, error) {
	var ep dispatcher.Endpoint
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		ep, err = s.loadEndpoint(tx, id)
		return err
	})
	if err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("endpoint %s: %w", id, err)
	}
	return ep, nil
}

// Endpoints returns a tenant's endpoints in id order, which is creation
// order to the millisecond.
func (s *Store) Endpoints(ctx context.Context, t practice.Tenant) ([]dispatcher.Endpoint, error) {
	var eps []dispatcher.Endpoint
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		eps, err = s.EndpointsTx(tx, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("endpoints of %s: %w", t, err)
	}
	return eps, nil
}

// EndpointsTx is Endpoints inside tx (dispatcher.TxIntake): the endpoints
// a change's events fan out to are those its own transaction sees.
func (s *Store) EndpointsTx(tx *bbolt.Tx, t practice.Tenant) ([]dispatcher.Endpoint, error) {
	var eps []dispatcher.Endpoint
	prefix := tenantKey(t)
	c := tx.Bucket([]byte(bucketEndpointsByTenant)).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ep, err := s.loadEndpoint(tx, string(k[len(prefix):]))
		if errors.Is(err, dispatcher.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

// CreateEndpoint stores a new endpoint.
func (s *Store) CreateEndpoint(ctx context.Context, ep dispatcher.Endpoint) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketEndpoints))
		if b.Get([]byte(ep.ID)) != nil {
			return fmt.Errorf("%w: endpoint %s exists", practice.ErrConflict, ep.ID)
		}
		if err := putJSON(b, ep.ID, sealEndpoint(s.secrets, ep)); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketEndpointsByTenant)).Put(concat(tenantKey(ep.Tenant()), []byte(ep.ID)), nil)
	})
	if err != nil {
		return fmt.Errorf("create endpoint %s: %w", ep.ID, err)
	}
	return nil
}

// UpdateEndpoint applies fn in one transaction. fn cannot move the
// endpoint to another id or tenant.
func (s *Store) UpdateEndpoint(ctx context.Context, id string, fn func(*dispatcher.Endpoint) error) (dispatcher.Endpoint, error) {
	var out dispatcher.Endpoint
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		ep, err := s.loadEndpoint(tx, id)
		if err != nil {
			return err
		}
		orig := ep
		if err := fn(&ep); err != nil {
			return err
		}
		ep.ID, ep.Firm, ep.Sandbox, ep.CreatedAt = orig.ID, orig.Firm, orig.Sandbox, orig.CreatedAt
		out = ep
		return putJSON(tx.Bucket([]byte(bucketEndpoints)), id, sealEndpoint(s.secrets, ep))
	})
	if err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("update endpoint %s: %w", id, err)
	}
	return out, nil
}

// DeleteEndpoint removes the endpoint and, in the same transaction, its
// deliveries, so no index is left pointing at either.
func (s *Store) DeleteEndpoint(ctx context.Context, id string) error {
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		ep, err := s.loadEndpoint(tx, id)
		if err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketEndpoints)).Delete([]byte(id)); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketEndpointsByTenant)).Delete(concat(tenantKey(ep.Tenant()), []byte(id))); err != nil {
			return err
		}
		return deleteDeliveriesOf(tx, id)
	})
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", id, err)
	}
	return nil
}

func deleteDeliveriesOf(tx *bbolt.Tx, endpointID string) error {
	byTarget := tx.Bucket([]byte(bucketDeliveriesByTarget))
	prefix := targetPrefix(endpointID)
	var keys [][]byte
	c := byTarget.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	q := openQueues(tx)
	dels := tx.Bucket([]byte(bucketDeliveries))
	for _, k := range keys {
		id := string(k[len(prefix)+8:])
		rec, err := loadDelivery(tx, id)
		if err == nil {
			if err := q.pull(&rec); err != nil {
				return err
			}
			if err := q.unlease(&rec); err != nil {
				return err
			}
		}
		if err := dels.Delete([]byte(id)); err != nil {
			return err
		}
		if err := byTarget.Delete(k); err != nil {
			return err
		}
	}
	if err := q.forget(endpointID); err != nil {
		return err
	}
	return q.finish()
}
