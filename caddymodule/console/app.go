package console

import (
	"context"
	"io"
	"time"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

// What the console needs of the practicegw app, found with
// ctx.App("practicegw"), each its own small interface.
type (
	// firms names the firms the gateway serves: false for one it does
	// not.
	firms interface {
		FirmName(id string) (string, bool)
	}
	// credentials is the registry the console signs administrators in
	// with and issues explorer credentials from.
	credentials interface {
		Credentials() *auth.Registry
	}
	// webhookSource is the webhook engine; the pages use it through the
	// small interfaces below.
	webhookSource interface {
		WebhookEngine() *dispatcher.Engine
	}
	// sandbox makes sandbox changes that raise events.
	sandbox interface {
		Trigger(ctx context.Context, firm, kind string) (adminapi.Triggered, error)
	}
	// trafficSource is a credential's usage against its ceiling. The app
	// answers it from the limiter that practicegw_ratelimit provisions and
	// hands to the app through ratelimit's own small interface: the app is
	// the one module both the limiter and the console already find with
	// ctx.App, and imports stay one-way (neither ratelimit nor the console
	// imports the app; the console takes only ratelimit's Traffic value).
	// Looking the limiter up in ratelimit's pool instead would make the
	// console rebuild the limiter's pool key (its rate and Redis settings),
	// which belong to the ratelimit handler's configuration, not to the
	// console's.
	trafficSource interface {
		Traffic(ctx context.Context, c *credential.Credential, since time.Time) (usage.Traffic, bool, error)
	}
	// useCounter counts a request the console served its signed-in
	// administrator in the credential's traffic (the Traffic page shows
	// it), spending none of its ceiling.
	useCounter interface {
		CountUse(credentialID string)
	}
	// deprecations are the routes the configuration marks for retirement.
	deprecations interface {
		Deprecations() []api.Deprecation
	}
	// syncs are the firm's real systems' syncs with the copy /v1 reads
	// are served from; system is a sync's Status.System.
	syncs interface {
		SyncStatus(firm string) []readmodel.Status
		Resync(ctx context.Context, firm, system string) error
	}
)

// App is all the console asks of the practicegw app; the app's package
// asserts at compile time that it provides it.
type App interface {
	firms
	credentials
	webhookSource
	sandbox
	trafficSource
	deprecations
	syncs
}

// Firm is a firm as the console shows it.
type Firm struct {
	ID   string
	Name string
}

// The webhook pages' view of the engine, grouped by what a page does.
type (
	endpointPages interface {
		ListEndpoints(ctx context.Context, t practice.Tenant) ([]dispatcher.Endpoint, error)
		GetEndpoint(ctx context.Context, t practice.Tenant, id string) (dispatcher.Endpoint, error)
		UpdateEndpoint(ctx context.Context, t practice.Tenant, id string, up dispatcher.EndpointUpdate) (dispatcher.Endpoint, error)
	}
	deliveryPages interface {
		ListDeliveries(ctx context.Context, t practice.Tenant, q dispatcher.DeliveryQuery) (dispatcher.DeliveryPage, error)
		GetDelivery(ctx context.Context, t practice.Tenant, id string) (dispatcher.Delivery, error)
		GetEvent(ctx context.Context, t practice.Tenant, id string) (dispatcher.Event, error)
	}
	replayer interface {
		Replay(ctx context.Context, t practice.Tenant, deliveryID string) (dispatcher.Delivery, error)
		ReplayFailed(ctx context.Context, t practice.Tenant, endpointID string, since time.Time) (int, error)
	}
	exporter interface {
		ExportNDJSON(ctx context.Context, t practice.Tenant, q dispatcher.ExportQuery, w io.Writer) error
		ExportCSV(ctx context.Context, t practice.Tenant, q dispatcher.ExportQuery, w io.Writer) error
	}
)
