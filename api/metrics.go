package api

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// RPCMetrics counts the calls the handler serves, by procedure and
// Connect code, and times them. It is a connect.Interceptor (pass it to
// NewHandler with connect.WithInterceptors) and a prometheus.Collector
// (register it where /metrics is served). Procedures are those mounted,
// so the labels stay few. Calls refused by Authorize never reach the
// handler and are not counted here.
type RPCMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  *prometheus.GaugeVec
}

// NewRPCMetrics returns empty RPC metrics.
func NewRPCMetrics() *RPCMetrics {
	return &RPCMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cep_rpc_requests_total",
			Help: "API calls finished, by procedure and Connect code (ok for none).",
		}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cep_rpc_request_duration_seconds",
			Help: "How long unary API calls took, by procedure (streams are not timed: they last as long as the client wants).",
			// from a local read to a deploy waiting for every shard
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"procedure"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cep_rpc_streams_active",
			Help: "Streaming API calls open, by procedure.",
		}, []string{"procedure"}),
	}
}

// codeLabel is the code label of a call's result.
func codeLabel(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(toConnectError(err)).String()
}

// WrapUnary counts and times a unary call.
func (m *RPCMetrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		res, err := next(ctx, req)
		proc := req.Spec().Procedure
		m.duration.WithLabelValues(proc).Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(proc, codeLabel(err)).Inc()
		return res, err
	}
}

// WrapStreamingClient leaves client streams alone.
func (m *RPCMetrics) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler counts a stream while it is open and when it ends.
func (m *RPCMetrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		proc := conn.Spec().Procedure
		open := m.streams.WithLabelValues(proc)
		open.Inc()
		defer open.Dec()
		err := next(ctx, conn)
		m.requests.WithLabelValues(proc, codeLabel(err)).Inc()
		return err
	}
}

// Describe implements prometheus.Collector.
func (m *RPCMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.duration.Describe(ch)
	m.streams.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *RPCMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.duration.Collect(ch)
	m.streams.Collect(ch)
}
