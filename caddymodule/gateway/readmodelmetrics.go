package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// storeServed is a firm's model on an instance that does not hold it,
// answering a read no holder could take (none is live, or the bounds hold
// the firm fewer times than asked): the model loads the firm from the
// shared store for it, and the answer says lagging, since no sync runs
// here to vouch for it.
type storeServed struct{ *readmodel.Model }

func (s storeServed) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	forwardStats.storeServed.Add(1)
	return s.Model.List(ctx, t, k, q)
}

func (s storeServed) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	forwardStats.storeServed.Add(1)
	return s.Model.Get(ctx, t, k, id)
}

// Freshness is the model's, lagging.
func (s storeServed) Freshness(k practice.Kind) (practice.Freshness, bool) {
	f, ok := s.Model.Freshness(k)
	f.State = readmodel.StateLagging
	return f, ok
}

// readModelCollector exports what this instance holds of the firms' read
// models, read at scrape time from the app that serves now.
type readModelCollector struct {
	firms, records, bytes, bound, short, forwarded, failed, storeServed *prometheus.Desc

	mu  sync.Mutex
	src *App
}

func registerReadModelCollector(reg prometheus.Registerer) (*readModelCollector, error) {
	c := &readModelCollector{
		firms: prometheus.NewDesc("practicegw_read_model_firms",
			"Firms whose read model this instance holds in memory.", nil, nil),
		records: prometheus.NewDesc("practicegw_read_model_records",
			"Records (and tombstones) of each firm this instance holds.", []string{"firm"}, nil),
		bytes: prometheus.NewDesc("practicegw_read_model_bytes",
			"Memory each firm held here takes, as the read_model memory bound counts it: records, indexes, tombstones.", []string{"firm"}, nil),
		bound: prometheus.NewDesc("practicegw_read_model_memory_bound_bytes",
			"The read_model memory bound of this instance; absent without one.", nil, nil),
		short: prometheus.NewDesc("practicegw_read_model_firms_short",
			"Firms the live instances' bounds cannot hold replicas times: read from the store instead, and marked lagging.", nil, nil),
		forwarded: prometheus.NewDesc("practicegw_read_model_forwarded_total",
			"Requests for firms held elsewhere, answered through a holder.", nil, nil),
		failed: prometheus.NewDesc("practicegw_read_model_forward_failures_total",
			"Requests whose holder could not be reached.", nil, nil),
		storeServed: prometheus.NewDesc("practicegw_read_model_store_served_total",
			"Reads of firms held nowhere reachable, answered here from the shared store.", nil, nil),
	}
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*readModelCollector); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}

func (c *readModelCollector) serve(a *App) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = a
}

func (c *readModelCollector) retire(a *App) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == a {
		c.src = nil
	}
}

// Describe implements prometheus.Collector.
func (c *readModelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.firms, c.records, c.bytes, c.bound, c.short, c.forwarded, c.failed, c.storeServed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *readModelCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	a := c.src
	c.mu.Unlock()
	if a == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	held := a.heldFirms()
	gauge(c.firms, float64(len(held)))
	for _, firm := range held {
		size := a.firms[firm].size()
		gauge(c.records, float64(size.Records), firm)
		gauge(c.bytes, float64(size.Bytes), firm)
	}
	if p := a.placer; p != nil {
		gauge(c.bound, float64(p.self.Memory))
		gauge(c.short, float64(len(p.shortOf())))
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(c.forwarded, forwardStats.forwarded.Load())
	counter(c.failed, forwardStats.failed.Load())
	counter(c.storeServed, forwardStats.storeServed.Load())
}

// heldFirms are the firms whose models this instance holds in memory:
// those placed here, or every firm with a model (its Caddyfile systems'
// or its connections') when every instance holds every firm.
func (a *App) heldFirms() []string {
	var out []string
	for id, b := range a.firms {
		if len(b.models()) == 0 {
			continue
		}
		if a.placer == nil || a.placer.holds(id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
