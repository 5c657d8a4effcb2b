package firms

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// Metrics are the runtime's on /metrics, read at scrape time from the
// runtime of the app that serves now: each firm system's sync and each
// connection's status, and what this instance holds of the firms' read
// models.
type Metrics struct {
	syncs  *syncCollector
	models *readModelCollector
}

// RegisterMetrics registers the runtime's metrics with reg, or takes over
// those registered there before (an app provisioned earlier on the same
// registry).
func RegisterMetrics(reg prometheus.Registerer) (*Metrics, error) {
	syncs, err := registerSyncCollector(reg)
	if err != nil {
		return nil, fmt.Errorf("sync metrics: %w", err)
	}
	models, err := registerReadModelCollector(reg)
	if err != nil {
		return nil, fmt.Errorf("read model metrics: %w", err)
	}
	return &Metrics{syncs: syncs, models: models}, nil
}

// Serve makes r the runtime the metrics say: the app that starts last.
func (m *Metrics) Serve(r *Runtime) {
	m.syncs.serve(r)
	m.models.serve(r)
}

// Retire stops saying r, unless a newer app's runtime has taken over.
func (m *Metrics) Retire(r *Runtime) {
	m.syncs.retire(r)
	m.models.retire(r)
}

// syncStates are the values of practicegw_sync_state's state label, each
// exported for every system so that a state's series does not vanish when
// a sync leaves it.
var syncStates = []string{readmodel.StateBackfilling, readmodel.StateLive, readmodel.StateLagging, readmodel.StateFailing}

// syncSource is what the sync metrics read at scrape time.
type syncSource interface {
	allSyncStatus() []readmodel.Status
	// allConnections are the firms' connections as the store last said.
	allConnections() []connection.Connection
}

// syncCollector exports each firm system's sync as the scrape finds it,
// from the app that serves now: the statuses change on their own (a
// backfill's progress, the data's age), so they are read when asked for
// rather than copied into gauges that would need a loop to keep current.
type syncCollector struct {
	state, age, records, seen, about, calls, budget, connections *prometheus.Desc

	now func() time.Time
	mu  sync.Mutex
	src syncSource
}

func newSyncCollector(now func() time.Time) *syncCollector {
	system := []string{"firm", "system"}
	kind := []string{"firm", "system", "kind"}
	return &syncCollector{
		now: now,
		state: prometheus.NewDesc("practicegw_sync_state",
			"Sync of each firm system with the read model: 1 for its current state, 0 for the others.",
			[]string{"firm", "system", "state"}, nil),
		age: prometheus.NewDesc("practicegw_sync_data_age_seconds",
			"Age of the oldest kind's data in each firm system's read model; absent until every kind is backfilled.",
			system, nil),
		records: prometheus.NewDesc("practicegw_sync_records",
			"Records of each kind in this instance's read model of each firm system.", kind, nil),
		seen: prometheus.NewDesc("practicegw_sync_backfill_seen",
			"Records the current full pass over each kind of each firm system has read.", kind, nil),
		about: prometheus.NewDesc("practicegw_sync_backfill_about",
			"Records the last full pass over each kind found, what the current one is measured against; absent before the first ends.",
			kind, nil),
		calls: prometheus.NewDesc("practicegw_sync_vendor_calls_last_hour",
			"Calls to each firm system's vendor in the last hour by the instance that runs its sync.", system, nil),
		budget: prometheus.NewDesc("practicegw_sync_vendor_budget_per_hour",
			"The vendor's published hourly limit for each firm system; absent when unknown.", system, nil),
		connections: prometheus.NewDesc("practicegw_connections",
			"Each firm's connection of each role: 1 for its current status, 0 for the others.",
			[]string{"firm", "role", "system", "status"}, nil),
	}
}

// registerSyncCollector registers the sync metrics with reg, or returns
// the collector registered there before (an app provisioned earlier on
// the same registry), so that the newest app can take it over.
func registerSyncCollector(reg prometheus.Registerer) (*syncCollector, error) {
	c := newSyncCollector(time.Now)
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*syncCollector); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}

// serve makes src the source of the metrics: the app that starts last.
func (c *syncCollector) serve(src syncSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = src
}

// retire stops reading src, unless a newer app has taken over.
func (c *syncCollector) retire(src syncSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == src {
		c.src = nil
	}
}

// Describe implements prometheus.Collector.
func (c *syncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.age, c.records, c.seen, c.about, c.calls, c.budget, c.connections} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *syncCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	now := c.now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	c.collectConnections(src.allConnections(), gauge)
	for _, st := range src.allSyncStatus() {
		for _, s := range syncStates {
			v := 0.0
			if st.State == s {
				v = 1
			}
			gauge(c.state, v, st.Firm, st.Role, s)
		}
		if !st.ConfirmedAt.IsZero() {
			gauge(c.age, st.Age(now).Seconds(), st.Firm, st.Role)
		}
		gauge(c.calls, float64(st.CallsLastHour), st.Firm, st.Role)
		if st.BudgetPerHour > 0 {
			gauge(c.budget, float64(st.BudgetPerHour), st.Firm, st.Role)
		}
		for _, k := range st.Kinds {
			gauge(c.records, float64(k.Records), st.Firm, st.Role, string(k.Kind))
			gauge(c.seen, float64(k.Seen), st.Firm, st.Role, string(k.Kind))
			if k.About > 0 {
				gauge(c.about, float64(k.About), st.Firm, st.Role, string(k.Kind))
			}
		}
	}
}

// connectionStatuses are the values of practicegw_connections' status
// label, each exported so that a status's series does not vanish when a
// connection leaves it.
var connectionStatuses = []connection.Status{connection.Pending, connection.ChooseOrganisation, connection.Connected,
	connection.NeedsReconnect, connection.Disconnected}

// collectConnections exports each connection's status. Only what names a
// connection goes in a label (firm, role, system, status): never its
// reason, tenant or id.
func (c *syncCollector) collectConnections(conns []connection.Connection, gauge func(*prometheus.Desc, float64, ...string)) {
	// One series per firm, role and system: the newest connection's.
	type key struct{ firm, role, system string }
	latest := map[key]connection.Status{}
	var order []key
	for _, conn := range conns {
		k := key{conn.Firm, conn.Role, conn.System}
		if _, ok := latest[k]; !ok {
			order = append(order, k)
		}
		latest[k] = conn.Status
	}
	for _, k := range order {
		for _, s := range connectionStatuses {
			v := 0.0
			if latest[k] == s {
				v = 1
			}
			gauge(c.connections, v, k.firm, k.role, k.system, string(s))
		}
	}
}

// readModelCollector exports what this instance holds of the firms' read
// models: the firms held, and each one's records and bytes as the
// read_model memory bound counts them; and the reads answered from the
// store for want of a holder.
type readModelCollector struct {
	firms, records, bytes, storeServed *prometheus.Desc

	mu  sync.Mutex
	src holdings
}

// holdings are what the read model metrics read at scrape time.
type holdings interface {
	Held() []string
	Size(firm string) readmodel.Size
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

func (c *readModelCollector) serve(src holdings) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = src
}

func (c *readModelCollector) retire(src holdings) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == src {
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
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	held := src.Held()
	gauge(c.firms, float64(len(held)))
	for _, firm := range held {
		size := src.Size(firm)
		gauge(c.records, float64(size.Records), firm)
		gauge(c.bytes, float64(size.Bytes), firm)
	}
	ch <- prometheus.MustNewConstMetric(c.storeServed, prometheus.CounterValue, float64(storeServedReads.Load()))
}

var (
	_ prometheus.Collector = (*syncCollector)(nil)
	_ prometheus.Collector = (*readModelCollector)(nil)
)

// notifiedMetric is practicegw_notification_latency_seconds: how long a
// vendor's notification took to become its change record, by firm and
// system, on this instance (the syncs' status says the last hour's
// percentiles). An app provisioned again on the same registry takes over
// the one registered before.
func notifiedMetric(reg prometheus.Registerer) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "practicegw_notification_latency_seconds",
		Help:    "Time from a vendor's change notification to the change record it led to.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"firm", "system"})
	if reg == nil {
		return h
	}
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(*prometheus.HistogramVec); ok {
				return prev
			}
		}
	}
	return h
}

// notified is the latency histogram of one firm's system.
func (r *Runtime) notified(firm, system string) prometheus.Observer {
	return r.latencies.WithLabelValues(firm, system)
}
