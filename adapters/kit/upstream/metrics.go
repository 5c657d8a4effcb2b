package upstream

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one attempt, the outcome label of
// practicegw_upstream_requests_total.
const (
	outcomeOK          = "ok"
	outcomeClientError = "client_error"  // 4xx other than 429
	outcomeRateLimited = "rate_limited"  // 429 from the vendor
	outcomeServerError = "server_error"  // 5xx
	outcomeTimeout     = "timeout"       // our per-attempt timeout
	outcomeNetwork     = "network_error" // could not connect or lost the connection
	outcomeBreakerOpen = "breaker_open"  // refused by our breaker, nothing sent
	outcomeBudget      = "budget_exhausted"
	outcomeCanceled    = "canceled" // the caller went away
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	breaker  *prometheus.GaugeVec
}

// newMetrics builds the collectors and registers them with reg. A second
// adapter registering the same metrics shares the first one's collectors,
// so any number of upstreams report under one metric name.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "practicegw_upstream_requests_total",
			Help: "Calls to upstream systems by outcome; each attempt of a retried call counts.",
		}, []string{"upstream", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "practicegw_upstream_request_duration_seconds",
			Help:    "Time of each attempt at an upstream call, to the end of the body.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"upstream"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "practicegw_upstream_breaker_state",
			Help: "Circuit breaker of each upstream: 0 closed, 1 half-open, 2 open.",
		}, []string{"upstream"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.requests, err = register(reg, m.requests)
	if err != nil {
		return nil, err
	}
	m.duration, err = register(reg, m.duration)
	if err != nil {
		return nil, err
	}
	m.breaker, err = register(reg, m.breaker)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
