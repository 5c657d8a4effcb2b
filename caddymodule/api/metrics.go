package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts requests by route (the OpenAPI operation id, so the label
// set stays small and never carries ids) and status.
type metrics struct {
	requests *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "practicegw_requests_total",
		Help: "Requests to /v1 by route (operation id) and status.",
	}, []string{"route", "status"})
	if err := reg.Register(c); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if !errors.As(err, &dup) {
			return nil, err
		}
		// A config reload registers again; keep counting on the first.
		c = dup.ExistingCollector.(*prometheus.CounterVec)
	}
	return &metrics{requests: c}, nil
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer, for
// streaming exports.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (m *metrics) observe(route string, status int) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}
