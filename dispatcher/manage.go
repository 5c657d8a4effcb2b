package dispatcher

import (
	"context"
	"fmt"

	"github.com/practicegw/practicegw/practice"
)

// EndpointInput registers an endpoint.
type EndpointInput struct {
	URL         string
	Events      []string
	Description string
}

// EndpointUpdate changes the fields that are set.
type EndpointUpdate struct {
	URL         *string
	Events      *[]string
	Description *string
	// Status is "enabled" or "disabled". Enabling clears the reason the
	// endpoint was disabled; it does not replay what failed meanwhile
	// (ReplayFailed does).
	Status *string
}

// defaultMaxEndpoints is Config.MaxEndpoints's default.
const defaultMaxEndpoints = 50

// CreateEndpoint validates and registers an endpoint for a tenant, and
// returns it with its signing secret, which is shown this once.
func (e *Engine) CreateEndpoint(ctx context.Context, t practice.Tenant, in EndpointInput) (Endpoint, string, error) {
	if err := ValidateURL(ctx, e.policy, in.URL); err != nil {
		return Endpoint{}, "", err
	}
	events, err := validateEvents(in.Events)
	if err != nil {
		return Endpoint{}, "", err
	}
	if err := validateDescription(in.Description); err != nil {
		return Endpoint{}, "", err
	}
	secret, err := newSecret()
	if err != nil {
		return Endpoint{}, "", err
	}
	e.createMu.Lock()
	defer e.createMu.Unlock()
	existing, err := e.b.Endpoints.Endpoints(ctx, t)
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("create endpoint: %w", err)
	}
	if len(existing) >= e.cfg.MaxEndpoints {
		return Endpoint{}, "", fmt.Errorf("create endpoint: %w (%d in %s)", practice.ErrTooManyEndpoints, e.cfg.MaxEndpoints, t)
	}
	now := e.now()
	ep := Endpoint{
		ID:          newEndpointID(now),
		Firm:        t.Firm,
		Sandbox:     t.Sandbox,
		URL:         in.URL,
		Events:      events,
		Description: in.Description,
		Status:      EndpointEnabled,
		Secrets:     []Secret{secret},
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	if err := e.b.Catalog.CreateEndpoint(ctx, ep); err != nil {
		return Endpoint{}, "", fmt.Errorf("create endpoint: %w", err)
	}
	return ep, secret.Key, nil
}

// GetEndpoint returns a tenant's endpoint; another tenant's is not found.
func (e *Engine) GetEndpoint(ctx context.Context, t practice.Tenant, id string) (Endpoint, error) {
	ep, err := e.b.Endpoints.Endpoint(ctx, id)
	if err != nil {
		return Endpoint{}, fmt.Errorf("get endpoint %s: %w", id, err)
	}
	if ep.Tenant() != t {
		return Endpoint{}, fmt.Errorf("get endpoint %s: %w", id, ErrNotFound)
	}
	return ep, nil
}

// ListEndpoints returns a tenant's endpoints, oldest first (to the
// millisecond). A firm has few endpoints, so the list is not paged.
func (e *Engine) ListEndpoints(ctx context.Context, t practice.Tenant) ([]Endpoint, error) {
	eps, err := e.b.Endpoints.Endpoints(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return eps, nil
}

// UpdateEndpoint changes an endpoint's URL, subscriptions, description or
// status.
func (e *Engine) UpdateEndpoint(ctx context.Context, t practice.Tenant, id string, up EndpointUpdate) (Endpoint, error) {
	// Validate outside the store's transaction: the URL check resolves DNS.
	if up.URL != nil {
		if err := ValidateURL(ctx, e.policy, *up.URL); err != nil {
			return Endpoint{}, err
		}
	}
	var events []string
	if up.Events != nil {
		var err error
		if events, err = validateEvents(*up.Events); err != nil {
			return Endpoint{}, err
		}
	}
	if up.Description != nil {
		if err := validateDescription(*up.Description); err != nil {
			return Endpoint{}, err
		}
	}
	if up.Status != nil && *up.Status != EndpointEnabled && *up.Status != EndpointDisabled {
		return Endpoint{}, practice.Invalid("status", "The status must be %q or %q.", EndpointEnabled, EndpointDisabled)
	}
	now := e.now()
	defer e.forgetEndpoint(id)
	ep, err := e.b.Endpoints.UpdateEndpoint(ctx, id, func(ep *Endpoint) error {
		if ep.Tenant() != t {
			return ErrNotFound
		}
		if up.URL != nil {
			ep.URL = *up.URL
		}
		if events != nil {
			ep.Events = events
		}
		if up.Description != nil {
			ep.Description = *up.Description
		}
		if up.Status != nil && *up.Status != ep.Status {
			ep.Status = *up.Status
			ep.DisabledReason = ""
			if ep.Status == EndpointDisabled {
				ep.DisabledReason = "Disabled through the API."
			}
		}
		ep.UpdatedAt = now
		return nil
	})
	if err != nil {
		return Endpoint{}, fmt.Errorf("update endpoint %s: %w", id, err)
	}
	return ep, nil
}

// DeleteEndpoint removes an endpoint and its delivery log.
func (e *Engine) DeleteEndpoint(ctx context.Context, t practice.Tenant, id string) error {
	if _, err := e.GetEndpoint(ctx, t, id); err != nil {
		return err
	}
	defer e.forgetEndpoint(id)
	if err := e.b.Catalog.DeleteEndpoint(ctx, id); err != nil {
		return fmt.Errorf("delete endpoint %s: %w", id, err)
	}
	return nil
}

// RotateSecret gives an endpoint a new signing secret and returns it; the
// previous ones keep signing for rotationOverlap.
func (e *Engine) RotateSecret(ctx context.Context, t practice.Tenant, id string) (Endpoint, string, error) {
	// Drawn outside the transaction so that a retried transaction function
	// does not rotate twice.
	now := e.now()
	fresh, err := newSecret()
	if err != nil {
		return Endpoint{}, "", err
	}
	defer e.forgetEndpoint(id)
	ep, err := e.b.Endpoints.UpdateEndpoint(ctx, id, func(ep *Endpoint) error {
		if ep.Tenant() != t {
			return ErrNotFound
		}
		ep.rotateTo(fresh, now)
		ep.UpdatedAt = now
		return nil
	})
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("rotate secret of %s: %w", id, err)
	}
	return ep, fresh.Key, nil
}
