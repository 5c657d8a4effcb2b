package api

import (
	"context"
	"io"
	"time"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/idempotency"
)

// What the API needs of the practicegw app, found with
// ctx.App("practicegw"), each its own small interface so that a route
// depends on what it uses and nothing more.
type (
	// tenants finds the systems a tenant's records come from.
	tenants interface {
		Systems(t practice.Tenant) (Systems, bool)
	}
	// idempotencySource is where Idempotency-Key writes are remembered.
	idempotencySource interface {
		Idempotency() IdempotencyStore
	}
	// webhookSource is the webhook engine; the routes use it through the
	// small interfaces below.
	webhookSource interface {
		WebhookEngine() *dispatcher.Engine
	}
	// sandbox makes sandbox changes that raise events.
	sandbox interface {
		Trigger(ctx context.Context, firm, kind string) (adminapi.Triggered, error)
	}
	// deprecations are the routes the configuration marks for retirement.
	deprecations interface {
		Deprecations() []Deprecation
	}
	// cursorKeys is the key paging cursors are sealed under, which every
	// instance shares so that a cursor from one is good on another.
	cursorKeys interface {
		CursorKey() []byte
	}
)

// App is all the API asks of the practicegw app; the app's package
// asserts at compile time that it provides it.
type App interface {
	tenants
	idempotencySource
	webhookSource
	sandbox
	deprecations
	cursorKeys
}

// Systems are the systems one tenant's records come from.
type Systems interface {
	// Reader serves the kind, or is nil if nothing does.
	Reader(k practice.Kind) practice.Reader
	Clients() practice.ClientWriter
	Jobs() practice.JobWriter
}

// IdempotencyStore remembers writes sent with an Idempotency-Key.
type IdempotencyStore interface {
	// Begin reserves key for a request, or returns the record it already
	// holds.
	Begin(ctx context.Context, key, fingerprint string) (*idempotency.Record, error)
	Finish(ctx context.Context, key string, rec idempotency.Record) error
	Abandon(ctx context.Context, key string) error
}

// The webhook routes' view of the engine, grouped by what a route does.
type (
	eventLog interface {
		ListEvents(ctx context.Context, q dispatcher.EventQuery) (dispatcher.EventPage, error)
		GetEvent(ctx context.Context, t practice.Tenant, id string) (dispatcher.Event, error)
	}
	endpointReader interface {
		GetEndpoint(ctx context.Context, t practice.Tenant, id string) (dispatcher.Endpoint, error)
		ListEndpoints(ctx context.Context, t practice.Tenant) ([]dispatcher.Endpoint, error)
	}
	endpointWriter interface {
		CreateEndpoint(ctx context.Context, t practice.Tenant, in dispatcher.EndpointInput) (dispatcher.Endpoint, string, error)
		UpdateEndpoint(ctx context.Context, t practice.Tenant, id string, up dispatcher.EndpointUpdate) (dispatcher.Endpoint, error)
		DeleteEndpoint(ctx context.Context, t practice.Tenant, id string) error
	}
	secretRotator interface {
		RotateSecret(ctx context.Context, t practice.Tenant, id string) (dispatcher.Endpoint, string, error)
	}
	deliveryLog interface {
		ListDeliveries(ctx context.Context, t practice.Tenant, q dispatcher.DeliveryQuery) (dispatcher.DeliveryPage, error)
		GetDelivery(ctx context.Context, t practice.Tenant, id string) (dispatcher.Delivery, error)
	}
	deliveryExporter interface {
		ExportNDJSON(ctx context.Context, t practice.Tenant, q dispatcher.ExportQuery, w io.Writer) error
		ExportCSV(ctx context.Context, t practice.Tenant, q dispatcher.ExportQuery, w io.Writer) error
	}
	replayer interface {
		Replay(ctx context.Context, t practice.Tenant, deliveryID string) (dispatcher.Delivery, error)
		ReplayFailed(ctx context.Context, t practice.Tenant, endpointID string, since time.Time) (int, error)
	}
)

// Deprecation announces that a route will be retired.
type Deprecation struct {
	Method string `json:"method"`
	// Path is the route's pattern as in the OpenAPI document, such as
	// /v1/jobs/{id}/stage.
	Path string `json:"path"`
	// Since is when the route was deprecated; Sunset when it goes.
	Since  time.Time `json:"since"`
	Sunset time.Time `json:"sunset"`
	// Link documents the migration.
	Link string `json:"link,omitempty"`
}
