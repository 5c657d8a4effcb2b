package dispatcher_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/practice"
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
		if err := create(live); !errors.Is(err, dispatcher.ErrTooManyEndpoints) {
			t.Fatalf("a fourth live endpoint: %v, want ErrTooManyEndpoints", err)
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

func TestMaxEndpointsFromEnvironment(t *testing.T) {
	cfg, err := dispatcher.EnvConfig(func(k string) string {
		return map[string]string{"PRACTICEGW_WEBHOOK_MAX_ENDPOINTS": "7"}[k]
	})
	if err != nil || cfg.MaxEndpoints != 7 {
		t.Fatalf("MaxEndpoints %d, %v", cfg.MaxEndpoints, err)
	}
	for _, bad := range []string{"0", "-1", "many"} {
		if _, err := dispatcher.EnvConfig(func(k string) string {
			return map[string]string{"PRACTICEGW_WEBHOOK_MAX_ENDPOINTS": bad}[k]
		}); err == nil {
			t.Errorf("PRACTICEGW_WEBHOOK_MAX_ENDPOINTS=%q accepted", bad)
		}
	}
}
