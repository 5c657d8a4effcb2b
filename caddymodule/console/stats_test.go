package console

import (
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
)

func TestPercentile(t *testing.T) {
	sorted := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	for _, c := range []struct {
		p    float64
		want int64
	}{{50, 10}, {95, 19}, {100, 20}, {1, 1}} {
		if got := percentile(sorted, c.p); got != c.want {
			t.Errorf("p%v = %d, want %d", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 || percentile([]int64{7}, 95) != 7 {
		t.Error("percentile of none or one value")
	}
}

func TestSummarise(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	attempt := func(n, code int, ms int64, errMsg string) dispatcher.Attempt {
		return dispatcher.Attempt{Number: n, Trigger: dispatcher.TriggerScheduled, StartedAt: at.Add(time.Duration(n) * time.Minute),
			DurationMS: ms, ResponseCode: code, Error: errMsg}
	}
	failed := dispatcher.Delivery{ID: "dlv_1", State: dispatcher.StateFailed}
	for i := 1; i <= 6; i++ {
		failed.Attempts = append(failed.Attempts, attempt(i, 500, 100, "the endpoint answered 500 Internal Server Error"))
	}
	ok := dispatcher.Delivery{ID: "dlv_2", State: dispatcher.StateDelivered,
		Attempts: []dispatcher.Attempt{attempt(1, 200, 20, ""), attempt(2, 204, 30, "")}}
	timeout := dispatcher.Delivery{ID: "dlv_3", State: dispatcher.StateRetrying,
		Attempts: []dispatcher.Attempt{attempt(7, 0, 15000, "timed out")}}

	s := summarise([]dispatcher.Delivery{failed, ok, timeout})
	if s.Deliveries != 3 || s.Failed != 1 || s.Delivered != 1 || s.Retrying != 1 {
		t.Errorf("states: %+v", s)
	}
	if s.Attempts != 9 || s.OK != 2 {
		t.Errorf("attempts %d ok %d, want 9 and 2", s.Attempts, s.OK)
	}
	if rate := s.SuccessRate(); rate < 0.222 || rate > 0.223 {
		t.Errorf("success rate %v, want 2/9", rate)
	}
	if s.P50 != 100 || s.P95 != 15000 {
		t.Errorf("p50 %d p95 %d, want 100 and 15000", s.P50, s.P95)
	}
	if s.LastFailure == nil || s.LastFailure.DeliveryID != "dlv_3" || s.Last.DeliveryID != "dlv_3" {
		t.Errorf("last failure %+v", s.LastFailure)
	}
	ep := dispatcher.Endpoint{Status: dispatcher.EndpointEnabled}
	if h := s.health(ep); h.Class != "bad" || h.Label != "Failing" {
		t.Errorf("health %+v, want failing", h)
	}
	if h := summarise([]dispatcher.Delivery{ok}).health(ep); h.Class != "ok" {
		t.Errorf("health of a healthy endpoint %+v", h)
	}
	if summarise(nil).SuccessRate() != -1 {
		t.Error("no attempts should have no success rate")
	}
	ep.Status, ep.DisabledReason = dispatcher.EndpointDisabled, "410 Gone"
	if h := summarise([]dispatcher.Delivery{ok}).health(ep); h.Label != "Disabled" {
		t.Errorf("a disabled endpoint is %+v", h)
	}
}
