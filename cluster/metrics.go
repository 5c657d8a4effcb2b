package cluster

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports the cluster's bound and what it did with requests, read
// at scrape time from the app that serves now: the bound and the firms
// the bounds cannot hold when instances share the firms, the forwarding
// counters always (they stay at zero on an instance that never forwards).
type Metrics struct {
	bound, short, forwarded, failed, refused *prometheus.Desc

	mu    sync.Mutex
	owner any
	src   *Cluster
}

// RegisterMetrics registers the metrics with reg, or returns those
// registered there before (an app provisioned earlier on the same
// registry), so that the newest app can take them over.
func RegisterMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		bound: prometheus.NewDesc("practicegw_read_model_memory_bound_bytes",
			"The read_model memory bound of this instance; absent without one.", nil, nil),
		short: prometheus.NewDesc("practicegw_read_model_firms_short",
			"Firms the live instances' bounds cannot hold replicas times: read from the store instead, and marked lagging.", nil, nil),
		forwarded: prometheus.NewDesc("practicegw_read_model_forwarded_total",
			"Requests for firms held elsewhere, answered through a holder.", nil, nil),
		failed: prometheus.NewDesc("practicegw_read_model_forward_failures_total",
			"Requests whose holder could not be reached.", nil, nil),
		refused: prometheus.NewDesc("practicegw_read_model_forwards_refused_total",
			"Requests at the internal listener refused, by why: not_signed, forged, stale, replayed, nonces_unavailable, other.",
			[]string{"reason"}, nil),
	}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*Metrics); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return m, nil
}

// Serve makes owner's cluster c (nil when its instances do not share the
// firms) the one the metrics say: the app that starts last.
func (m *Metrics) Serve(owner any, c *Cluster) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owner, m.src = owner, c
}

// Retire stops saying owner's cluster, unless a newer app has taken over.
func (m *Metrics) Retire(owner any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owner == owner {
		m.owner, m.src = nil, nil
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.bound, m.short, m.forwarded, m.failed, m.refused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	owner, c := m.owner, m.src
	m.mu.Unlock()
	if owner == nil {
		return
	}
	if c != nil {
		ch <- prometheus.MustNewConstMetric(m.bound, prometheus.GaugeValue, float64(c.self.Memory))
		ch <- prometheus.MustNewConstMetric(m.short, prometheus.GaugeValue, float64(len(c.shortOf())))
	}
	ch <- prometheus.MustNewConstMetric(m.forwarded, prometheus.CounterValue, float64(forwardStats.forwarded.Load()))
	ch <- prometheus.MustNewConstMetric(m.failed, prometheus.CounterValue, float64(forwardStats.failed.Load()))
	for i, reason := range refusalReasons {
		ch <- prometheus.MustNewConstMetric(m.refused, prometheus.CounterValue, float64(forwardStats.refused[i].Load()), reason)
	}
}

var _ prometheus.Collector = (*Metrics)(nil)
