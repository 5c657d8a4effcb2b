package ratelimit

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts decisions for operators. No label carries a credential
// id: there are as many as there are integrations, and usage per
// credential is what Limiter.Usage is for.
type metrics struct {
	decisions *prometheus.CounterVec // outcome: allowed, refused, fallback
	fallbacks *prometheus.CounterVec // mode: local, allow, deny
	latency   prometheus.Histogram

	// The children a handler counts into, looked up once rather than per
	// request.
	allowed, refused, fellBack, fallbackMode prometheus.Counter
}

// newMetrics registers the collectors with reg (nil: count without
// exporting) for a handler whose fallback is mode.
func newMetrics(reg prometheus.Registerer, mode Fallback) (*metrics, error) {
	const ns, sub = "practicegw", "ratelimit"
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "decisions_total",
			Help: "Rate limit decisions by outcome: allowed, refused, or fallback when Redis could not be asked.",
		}, []string{"outcome"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "fallback_total",
			Help: "Requests decided by the fallback while Redis was unreachable, by fallback mode.",
		}, []string{"mode"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "decision_duration_seconds",
			Help:    "Time taken to decide a request, Redis round trip included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}),
	}
	if reg != nil {
		var err error
		if m.decisions, err = register(reg, m.decisions); err != nil {
			return nil, err
		}
		if m.fallbacks, err = register(reg, m.fallbacks); err != nil {
			return nil, err
		}
		if m.latency, err = register(reg, m.latency); err != nil {
			return nil, err
		}
	}
	m.allowed = m.decisions.WithLabelValues("allowed")
	m.refused = m.decisions.WithLabelValues("refused")
	m.fellBack = m.decisions.WithLabelValues("fallback")
	m.fallbackMode = m.fallbacks.WithLabelValues(string(mode))
	return m, nil
}

// register adds c to reg, or returns the collector already there: every
// handler of one config shares one registry, and the second must count
// into the first one's collectors.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

func (m *metrics) observe(d Decision, took time.Duration) {
	m.latency.Observe(took.Seconds())
	switch {
	case d.Fallback:
		m.fellBack.Inc()
		m.fallbackMode.Inc()
	case d.Allowed:
		m.allowed.Inc()
	default:
		m.refused.Inc()
	}
}
