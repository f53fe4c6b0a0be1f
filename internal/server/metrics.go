package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/handoff-run/handoff/errs"
)

// metrics are the HTTP layer's Prometheus series. Every label value comes
// from a fixed set — route patterns, status codes, error codes — so no
// request can create a new series.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	writes   *prometheus.CounterVec
	streams  prometheus.Gauge
	handler  http.Handler
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func newMetrics(reg *prometheus.Registry) *metrics {
	return &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"})),
		duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "handoff_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms to ~16 s
		}, []string{"route"})),
		writes: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoff_writes_total",
			Help: "Document writes through the API by result: ok, existing (an ifAbsent no-op) or the error code.",
		}, []string{"result"})),
		streams: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "handoff_feed_streams",
			Help: "Live feed (SSE) streams open now.",
		})),
		handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
	}
}

// register adds c to reg, or returns the collector already registered
// under the same name, so several servers can share one registry (tests,
// or one process serving on two listeners).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(err)
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}

// write counts one document write by its outcome.
func (m *metrics) write(existing bool, err error) {
	result := "ok"
	switch {
	case err != nil:
		result = string(errs.CodeOf(err))
	case existing:
		result = "existing"
	}
	m.writes.WithLabelValues(result).Inc()
}
