package dispatcher_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
)

// A firm's endpoints are bounded in each mode, so its credentials cannot
// multiply the signed requests every change sends; the bound is one
// firm's and one mode's, and deleting an endpoint makes room.
func TestEndpointCeilingPerFirmAndMode(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{MaxEndpoints: 3})
		other := practice.Tenant{Firm: "frm_birch"}
		var first dispatcher.Endpoint
		for i := range 3 {
			ep, _ := h.endpoint(live, fmt.Sprintf("http://127.0.0.1:9/hooks/%d", i))
			if i == 0 {
				first = ep
			}
		}
		create := func(t practice.Tenant) error {
			_, _, err := h.eng.CreateEndpoint(h.ctx, t, dispatcher.EndpointInput{URL: "http://127.0.0.1:9/more", Events: []string{"*"}})
			return err
		}
		if err := create(live); !errors.Is(err, practice.ErrTooManyEndpoints) {
			t.Fatalf("a fourth live endpoint: %v, want practice.ErrTooManyEndpoints", err)
		}
		if err := create(sandbox); err != nil {
			t.Fatalf("the firm's sandbox has its own ceiling: %v", err)
		}
		if err := create(other); err != nil {
			t.Fatalf("another firm has its own ceiling: %v", err)
		}
		if err := h.eng.DeleteEndpoint(h.ctx, live, first.ID); err != nil {
			t.Fatal(err)
		}
		if err := create(live); err != nil {
			t.Fatalf("after a delete there is room: %v", err)
		}
		if got, _ := h.eng.ListEndpoints(h.ctx, live); len(got) != 3 {
			t.Fatalf("%d live endpoints, want 3", len(got))
		}
	})
}

// One firm's endpoints together have at most MaxInFlightPerFirm requests
// in flight, however many endpoints it registers; while they hang, another
// firm's delivery goes out at once; released, every one of the firm's
// deliveries arrives exactly once and nothing is left to come.
func TestInFlightBoundPerFirm(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{MaxInFlightPerFirm: 2, MaxInFlightPerEndpoint: 2})
		release := make(chan struct{})
		slow := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		quick := newReceiver(t, nil)
		var eps []string
		for i := range 3 {
			ep, _ := h.endpoint(live, fmt.Sprintf("%s/%d", slow.URL(), i))
			eps = append(eps, ep.ID)
		}
		birch := practice.Tenant{Firm: "frm_birch"}
		other, _ := h.endpoint(birch, quick.URL())
		for range 4 {
			h.ingest(clientChange(live))
		}
		eventually.True(t, waitWithin, waitTick, "the firm's bound reached", func() bool { return slow.active.Load() == 2 })

		h.ingest(clientChange(birch))
		eventually.True(t, waitWithin, waitTick, "the other firm's delivery", func() bool { return quick.count() == 1 })
		if got := slow.peak.Load(); got > 2 {
			t.Fatalf("%d of one firm's requests in flight at once, bound 2", got)
		}

		close(release)
		eventually.True(t, waitWithin, waitTick, "every delivery of the firm", func() bool { return slow.count() == 12 })
		// Each of the 4 events once at each of the 3 endpoints.
		seen := map[string]int{}
		for _, r := range slow.requests() {
			seen[r.header.Get("webhook-id")]++
		}
		for id, n := range seen {
			if n != 3 {
				t.Fatalf("event %s arrived %d times, want once at each of 3 endpoints", id, n)
			}
		}
		if got := slow.peak.Load(); got > 2 {
			t.Fatalf("%d of one firm's requests in flight at once, bound 2", got)
		}
		var ids []string
		for _, ep := range append(eps, other.ID) {
			for _, d := range h.deliveries(ep) {
				ids = append(ids, d.ID)
			}
		}
		eventually.True(t, waitWithin, waitTick, "all recorded", func() bool {
			for _, id := range ids {
				if h.delivery(id).State != dispatcher.StateDelivered {
					return false
				}
			}
			return true
		})
		h.settled(ids...)
	})
}
