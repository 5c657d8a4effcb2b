package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

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

// storeServedReads counts the reads answered from the store, for
// /metrics; process-wide, so a reload keeps counting.
var storeServedReads atomic.Uint64

func (s storeServed) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	storeServedReads.Add(1)
	return s.Model.List(ctx, t, k, q)
}

func (s storeServed) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	storeServedReads.Add(1)
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
	firms, records, bytes, storeServed *prometheus.Desc

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
	for _, d := range []*prometheus.Desc{c.firms, c.records, c.bytes, c.storeServed} {
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
	held := a.Held()
	gauge(c.firms, float64(len(held)))
	for _, firm := range held {
		size := a.firms[firm].size()
		gauge(c.records, float64(size.Records), firm)
		gauge(c.bytes, float64(size.Bytes), firm)
	}
	ch <- prometheus.MustNewConstMetric(c.storeServed, prometheus.CounterValue, float64(storeServedReads.Load()))
}
