package kafka

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
)

type consumerMetrics struct {
	lag      *prometheus.GaugeVec
	changes  prometheus.Counter
	rejected prometheus.Counter
}

func newConsumerMetrics(reg prometheus.Registerer) *consumerMetrics {
	return &consumerMetrics{
		lag: dispatcher.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "practicegw_consumer_lag",
			Help: "Messages published but not yet handled, over the partitions this dispatcher holds.",
		}, []string{"topic"})),
		changes: dispatcher.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "practicegw_changes_consumed_total",
			Help: "Change records handled and committed.",
		})),
		rejected: dispatcher.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "practicegw_changes_rejected_total",
			Help: "Change records skipped because they can never become events (unreadable, no id or firm, too large).",
		})),
	}
}

// kafkaLogger sends kafka-go's error logs to zap.
func kafkaLogger(log *zap.Logger) kafkago.Logger {
	return kafkago.LoggerFunc(func(msg string, args ...any) {
		log.Warn(fmt.Sprintf(msg, args...))
	})
}
