package dispatcher_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
)

// Run prunes the webhook log on its own: once the retention period has
// passed, a delivered delivery and its event go, while a delivery still
// retrying stays with its event.
func TestRunPrunesTheWebhookLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		reg := prometheus.NewRegistry()
		h := newHarness(t, store, dispatcher.Config{PruneInterval: 20 * time.Millisecond, Registerer: reg})
		ok := newReceiver(t, status(http.StatusOK))
		down := newReceiver(t, status(http.StatusServiceUnavailable))
		okEp, _ := h.endpoint(live, ok.URL())
		h.ingest(clientChange(live))
		delivered := h.waitAttempts(h.only(okEp.ID).ID, 1)
		if delivered.State != dispatcher.StateDelivered {
			t.Fatalf("delivery %s, want delivered", delivered.State)
		}
		downEp, _ := h.endpoint(live, down.URL())
		if _, err := h.eng.UpdateEndpoint(h.ctx, live, okEp.ID, dispatcher.EndpointUpdate{Status: ptr(dispatcher.EndpointDisabled)}); err != nil {
			t.Fatal(err)
		}
		h.ingest(clientChange(live))
		retrying := h.waitAttempts(h.only(downEp.ID).ID, 1)
		if retrying.State != dispatcher.StateRetrying {
			t.Fatalf("delivery %s, want retrying", retrying.State)
		}

		h.clock.Advance(dispatcher.DefaultRetention + time.Hour)
		eventually.True(t, waitWithin, waitTick, "the delivered delivery pruned", func() bool {
			_, err := h.store.Delivery(h.ctx, delivered.ID)
			return errors.Is(err, dispatcher.ErrNotFound)
		})
		eventually.True(t, waitWithin, waitTick, "its event pruned", func() bool {
			_, err := h.eng.GetEvent(h.ctx, live, delivered.EventID)
			return errors.Is(err, dispatcher.ErrNotFound)
		})
		if d := h.delivery(retrying.ID); d.State != dispatcher.StateRetrying {
			t.Errorf("the retrying delivery is %s", d.State)
		}
		if _, err := h.eng.GetEvent(h.ctx, live, retrying.EventID); err != nil {
			t.Errorf("the retrying delivery's event: %v", err)
		}
		eventually.True(t, waitWithin, waitTick, "the pruned metric", func() bool { return pruned(t, reg, "delivery") == 1 && pruned(t, reg, "event") == 1 })
	})
}

// Prune does nothing when retention is off.
func TestPruneOff(t *testing.T) {
	eachBackend(t, func(t *testing.T, store backend) {
		h := newHarness(t, store, dispatcher.Config{Retention: -1})
		rc := newReceiver(t, status(http.StatusOK))
		ep, _ := h.endpoint(live, rc.URL())
		h.ingest(clientChange(live))
		d := h.waitAttempts(h.only(ep.ID).ID, 1)
		h.clock.Advance(10 * dispatcher.DefaultRetention)
		if res, err := h.eng.Prune(h.ctx); err != nil || res.Events+res.Deliveries != 0 {
			t.Fatalf("Prune = %+v, %v; want nothing removed", res, err)
		}
		h.delivery(d.ID)
	})
}

// pruned reads practicegw_webhook_log_pruned_total{kind}.
func pruned(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "practicegw_webhook_log_pruned_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func ptr[T any](v T) *T { return &v }
