package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// metrics are the engine's Prometheus series. The same series serve every
// engine in a process (a config reload builds a new one), so registering
// twice reuses what is registered.
type metrics struct {
	events   *prometheus.CounterVec
	outcomes *prometheus.CounterVec
	duration prometheus.Histogram
	backlog  prometheus.Gauge
	pruned   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		events: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "practicegw_events_total",
			Help: "Events recorded, by kind; an event seen again (a re-read change) is not counted twice.",
		}, []string{"event"})),
		outcomes: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "practicegw_deliveries_total",
			Help: "Webhook attempts, by the state they left the delivery in: delivered, retrying or failed.",
		}, []string{"outcome"})),
		duration: Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "practicegw_delivery_attempt_duration_seconds",
			Help:    "Time from sending a webhook request to its response or failure.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
		})),
		backlog: Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "practicegw_retry_backlog",
			Help: "Deliveries waiting for an attempt, due now or scheduled for a retry, across every dispatcher sharing the store.",
		})),
		pruned: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "practicegw_webhook_log_pruned_total",
			Help: "Records removed from the webhook log once past its retention, by kind: event or delivery (with its attempts).",
		}, []string{"kind"})),
	}
}

// Register registers c with reg and returns it, or the collector of the
// same description registered already.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// A clash of names with a different shape is a programming error,
		// but metrics are not worth refusing to deliver webhooks over.
	}
	return c
}

// backlogInterval is how often Run samples the backlog gauge.
const backlogInterval = 5 * time.Second

// sampleBacklog keeps the backlog gauge current until ctx is done.
func (e *Engine) sampleBacklog(ctx context.Context) {
	t := time.NewTicker(backlogInterval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, backlogInterval)
		n, err := e.b.Queue.Backlog(sctx)
		cancel()
		switch {
		case err == nil:
			e.metrics.backlog.Set(float64(n))
		case ctx.Err() == nil:
			e.log.Warn("counting the webhook backlog failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
