package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// defaultSandboxTriggersPerMinute is App.SandboxTriggersPerMinute's
// default.
const defaultSandboxTriggersPerMinute = 60

// Trigger makes a realistic change in a firm's sandbox records that raises
// one event of the given kind through the whole pipeline, as `stripe
// trigger` does. The event id is known at once because ids derive from the
// change; delivery follows through the outbox like any other write.
func (a *App) Trigger(ctx context.Context, firm, kind string) (adminapi.Triggered, error) {
	if _, ok := a.firms.FirmName(firm); !ok {
		return adminapi.Triggered{}, practice.Invalid("firm", "This gateway serves no firm %q.", firm)
	}
	// Each trigger makes a change and signed webhooks to every sandbox
	// endpoint: a firm's credentials get a bounded number a minute, shared
	// by every instance when the budget lives in Redis.
	limit := a.SandboxTriggersPerMinute
	if limit <= 0 {
		limit = defaultSandboxTriggersPerMinute
	}
	wait, err := a.stores.budget.Take(ctx, "sandbox_triggers/"+firm, limit, time.Minute)
	if err != nil {
		return adminapi.Triggered{}, fmt.Errorf("sandbox trigger budget: %w", err)
	}
	if wait > 0 {
		secs := int64(math.Ceil(wait.Seconds()))
		return adminapi.Triggered{}, apierror.New(http.StatusTooManyRequests, "rate_limited",
			fmt.Sprintf("This firm may make %d sandbox triggers a minute; try again in %d s.", limit, secs)).
			WithHeader("Retry-After", strconv.FormatInt(secs, 10))
	}
	change, err := a.stores.shared.demo.Trigger(ctx, firm, kind)
	if err != nil {
		return adminapi.Triggered{}, err
	}
	events, err := dispatcher.Derive(change)
	if err != nil {
		return adminapi.Triggered{}, fmt.Errorf("deriving the triggered event: %w", err)
	}
	// engagement_letter.signed is delivered under that name but recorded
	// as engagement.signed.
	want := kind
	if kind == "engagement_letter.signed" {
		want = "engagement.signed"
	}
	for _, ev := range events {
		if ev.Event == want {
			return adminapi.Triggered{Event: kind, EventID: ev.ID, Resource: change.ResourceID, Object: change.After}, nil
		}
	}
	return adminapi.Triggered{}, fmt.Errorf("the sandbox change for %s raised no such event", kind)
}
