package gateway

import (
	"context"
	"fmt"

	"github.com/practicegw/practicegw/caddymodule/api"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/practice"
)

// Trigger makes a realistic change in a firm's sandbox records that raises
// one event of the given kind through the whole pipeline, as `stripe
// trigger` does. The event id is known at once because ids derive from the
// change; delivery follows through the outbox like any other write.
func (a *App) Trigger(ctx context.Context, firm, kind string) (api.Triggered, error) {
	if _, ok := a.firms[firm]; !ok {
		return api.Triggered{}, practice.Invalid("firm", "This gateway serves no firm %q.", firm)
	}
	change, err := a.shared.demo.Trigger(ctx, firm, kind)
	if err != nil {
		return api.Triggered{}, err
	}
	events, err := dispatcher.Derive(change)
	if err != nil {
		return api.Triggered{}, fmt.Errorf("deriving the triggered event: %w", err)
	}
	// engagement_letter.signed is delivered under that name but recorded
	// as engagement.signed.
	want := kind
	if kind == "engagement_letter.signed" {
		want = "engagement.signed"
	}
	for _, ev := range events {
		if ev.Event == want {
			return api.Triggered{Event: kind, EventID: ev.ID, Resource: change.ResourceID, Object: change.After}, nil
		}
	}
	return api.Triggered{}, fmt.Errorf("the sandbox change for %s raised no such event", kind)
}
