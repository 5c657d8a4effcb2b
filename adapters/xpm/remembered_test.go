package xpm_test

import (
	"context"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// A firm whose records connection moves to another practice forgets the
// old one's stamps with its copy (what Module.Remembered names): a client
// of the new practice is first seen when it is read there, even when the
// old practice had a client of the same id and content, which would
// otherwise lend it its first-seen time.
func TestAnotherPracticesRecordsAreFirstSeenAfresh(t *testing.T) {
	ctx := context.Background()
	state := changes.NewMemoryState()
	clock := vendortest.NewClock(epoch)
	open := func(x *vendortest.XPM) *xpm.Adapter {
		cfg := xpm.Config{Firm: "frm_acme", TenantID: x.TenantID, BaseURL: x.URL,
			OAuth2:   upstream.OAuth2Config{AccessToken: x.Token},
			Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
		a, err := xpm.New(cfg, upstream.Deps{Clock: clock, Changes: &sink{}, State: state})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	clients := func(a *xpm.Adapter) []practice.Client {
		return decode[practice.Client](t, vendortest.ListAll(t, a, live, practice.Clients, practice.Filter{}, 200))
	}
	before := clients(open(fixture(t)))
	if len(before) == 0 || !before[0].UpdatedAt.Equal(epoch) || before[0].CreatedAt != nil {
		t.Fatalf("the first practice's clients: %d, the first stamped %v (created %v)", len(before), before[0].UpdatedAt, before[0].CreatedAt)
	}

	clock.Advance(24 * time.Hour)
	// The switch: the gateway forgets what the module says it remembers
	// of the firm's records.
	for _, prefix := range (&xpm.Module{}).Remembered("frm_acme", firmsystem.Kinds("records")) {
		if err := state.Forget(ctx, prefix); err != nil {
			t.Fatal(err)
		}
	}
	after := clients(open(fixture(t)))
	if len(after) != len(before) {
		t.Fatalf("%d clients in the second practice, want %d", len(after), len(before))
	}
	for _, c := range after {
		if c.CreatedAt != nil || !c.UpdatedAt.Equal(clock.Now()) {
			t.Fatalf("%s of the second practice: created %v, updated %v; want none and %v, when it was first seen there",
				c.ID, c.CreatedAt, c.UpdatedAt, clock.Now())
		}
	}
}
