package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	itest "github.com/cepcluster/cep/internal/testutil"
)

// The interceptor counts every call by procedure and code, under every
// protocol, times the unary ones, and counts the streams open.
func TestRPCMetrics(t *testing.T) {
	b, p, _, _, _, m := allFakes()
	p.GetFunc = func(_ context.Context, req *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
		if req.Name != "p" {
			return nil, fmt.Errorf("pattern %q: %w", req.Name, ErrNotFound)
		}
		return &cepv1.GetPatternResponse{}, nil
	}
	opened := make(chan struct{})
	m.TailFunc = func(ctx context.Context, req *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		if req.Pattern == "wait" {
			opened <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return send(&cepv1.Record{Type: "match"})
	}
	metrics := NewRPCMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics)
	ts := startServer(t, NewHandler(b, connect.WithInterceptors(metrics)))
	const get, tail = "/cep.v1.PatternService/GetPattern", "/cep.v1.MatchService/Tail"
	for i, pr := range protocols {
		pc := cepv1connect.NewPatternServiceClient(pr.http(ts), ts.URL, pr.opts...)
		mc := cepv1connect.NewMatchServiceClient(pr.http(ts), ts.URL, pr.opts...)
		for range 2 {
			if _, err := pc.GetPattern(t.Context(), connect.NewRequest(&cepv1.GetPatternRequest{Name: "p"})); err != nil {
				t.Fatalf("%s: %v", pr.name, err)
			}
		}
		if _, err := pc.GetPattern(t.Context(), connect.NewRequest(&cepv1.GetPatternRequest{Name: "q"})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("%s: %v, want NotFound", pr.name, err)
		}
		st, err := mc.Tail(t.Context(), connect.NewRequest(&cepv1.TailRequest{Pattern: "p"}))
		if err != nil {
			t.Fatal(err)
		}
		for st.Receive() {
		}
		st.Close()

		ctx, cancel := context.WithCancel(t.Context())
		// the call returns with the response's headers, which the backend
		// sends with its first record: it waits in its own goroutine
		done := make(chan struct{})
		go func() {
			defer close(done)
			if st, err := mc.Tail(ctx, connect.NewRequest(&cepv1.TailRequest{Pattern: "wait"})); err == nil {
				st.Receive()
				st.Close()
			}
		}()
		defer func() { cancel(); <-done }()
		select {
		case <-opened:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the stream did not open", pr.name)
		}
		if v := testutil.ToFloat64(metrics.streams.WithLabelValues(tail)); v != 1 {
			t.Fatalf("%s: %v streams open, want 1", pr.name, v)
		}
		cancel()
		n := float64(i + 1)
		itest.Eventually(t, 10*time.Second, func() error {
			if v := testutil.ToFloat64(metrics.streams.WithLabelValues(tail)); v != 0 {
				return fmt.Errorf("%v streams open after the client cancelled", v)
			}
			if v := testutil.ToFloat64(metrics.requests.WithLabelValues(tail, "canceled")); v != n {
				return fmt.Errorf("%v cancelled tails counted, want %v", v, n)
			}
			return nil
		})
		for _, c := range []struct {
			proc, code string
			want       float64
		}{{get, "ok", 2 * n}, {get, "not_found", n}, {tail, "ok", n}} {
			if v := testutil.ToFloat64(metrics.requests.WithLabelValues(c.proc, c.code)); v != c.want {
				t.Errorf("%s: cep_rpc_requests_total{procedure=%q,code=%q} = %v, want %v", pr.name, c.proc, c.code, v, c.want)
			}
		}
	}
	// the histogram times the unary calls only
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cep_rpc_request_duration_seconds" {
			continue
		}
		if len(mf.Metric) != 1 || mf.Metric[0].Label[0].GetValue() != get {
			t.Fatalf("histograms %v, want GetPattern's only", mf.Metric)
		}
		if n := mf.Metric[0].Histogram.GetSampleCount(); n != uint64(3*len(protocols)) {
			t.Fatalf("%d GetPattern calls timed, want %d", n, 3*len(protocols))
		}
		return
	}
	t.Fatal("no cep_rpc_request_duration_seconds")
}
