package api

import (
	"context"
	stdjson "encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

func records(n int) []*cepv1.Record {
	rs := make([]*cepv1.Record, n)
	for i := range rs {
		typ := []string{"match", "timeout", "late"}[i%3]
		rs[i] = &cepv1.Record{
			Type:     typ,
			Id:       fmt.Sprintf("id-%d", i),
			Pattern:  "p",
			Key:      fmt.Sprintf("acc-%d", i),
			Json:     fmt.Appendf(nil, `{"type":%q,"pattern":"p","key":"acc-%d"}`, typ, i),
			Sequence: uint64(100 + i),
		}
	}
	return rs
}

// TestTail streams several records, then ends the stream normally, under
// every protocol.
func TestTail(t *testing.T) {
	b, _, _, _, _, m := allFakes()
	want := records(5)
	wantReq := &cepv1.TailRequest{Pattern: "p", Start: cepv1.TailStart_TAIL_START_SEQUENCE, StartSequence: 100}
	m.TailFunc = func(_ context.Context, req *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		if !proto.Equal(req, wantReq) {
			t.Errorf("backend got %v, want %v", req, wantReq)
		}
		for _, r := range want {
			if err := send(r); err != nil {
				return err
			}
		}
		return nil
	}
	ts := startServer(t, NewHandler(b))
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			mc := cepv1connect.NewMatchServiceClient(pr.http(ts), ts.URL, pr.opts...)
			stream, err := mc.Tail(t.Context(), connect.NewRequest(wantReq))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			var got []*cepv1.Record
			for stream.Receive() {
				got = append(got, stream.Msg())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream ended with %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d records, want %d", len(got), len(want))
			}
			for i := range want {
				// every client gets the record as an object too, the same
				// as json holds (grpcurl speaks the binary codec)
				rec := got[i].Record
				got[i].Record = nil
				if !proto.Equal(got[i], want[i]) {
					t.Errorf("record %d: got %v, want %v", i, got[i], want[i])
				}
				if rec == nil {
					t.Errorf("record %d over %s: no record", i, pr.name)
				} else {
					var w map[string]any
					if err := stdjson.Unmarshal(want[i].Json, &w); err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(rec.AsMap(), w) {
						t.Errorf("record %d: record %v, json %s", i, rec.AsMap(), want[i].Json)
					}
				}
			}
		})
	}
}

// TestTailClientCancel checks that a client going away cancels the
// backend's context, so a tail blocked on new records returns.
func TestTailClientCancel(t *testing.T) {
	b, _, _, _, _, m := allFakes()
	var returned atomic.Value // error the backend returned
	done := make(chan struct{})
	m.TailFunc = func(ctx context.Context, _ *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		defer close(done)
		if err := send(records(1)[0]); err != nil {
			returned.Store(err)
			return err
		}
		<-ctx.Done() // waiting for records that never come
		returned.Store(ctx.Err())
		return ctx.Err()
	}
	ts := startServer(t, NewHandler(b))
	ctx, cancel := context.WithCancel(t.Context())
	mc := cepv1connect.NewMatchServiceClient(ts.H2C, ts.URL, connect.WithGRPC())
	stream, err := mc.Tail(ctx, connect.NewRequest(&cepv1.TailRequest{Pattern: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatalf("no first record: %v", stream.Err())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("backend Tail still running 10s after the client cancelled")
	}
	if err, _ := returned.Load().(error); err == nil {
		t.Error("backend saw no cancellation")
	}
	if stream.Receive() {
		t.Error("record after cancel")
	}
	if code := connect.CodeOf(stream.Err()); code != connect.CodeCanceled {
		t.Errorf("client got %v, want canceled", stream.Err())
	}
	stream.Close()
}

// TestServerSpeaksH2C checks that the gRPC and h2c clients really reach the
// handler over HTTP/2 without TLS, and the HTTP/1.1 client over HTTP/1.1.
func TestServerSpeaksH2C(t *testing.T) {
	b, p, _, _, _, _ := allFakes()
	p.ListFunc = func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
		return &cepv1.ListPatternsResponse{}, nil
	}
	var proto atomic.Value
	inner := NewHandler(b)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		inner.ServeHTTP(w, r)
	}))
	for _, tc := range []struct {
		client *http.Client
		opts   []connect.ClientOption
		want   string
	}{
		{ts.H2C, []connect.ClientOption{connect.WithGRPC()}, "HTTP/2.0"},
		{ts.H2C, nil, "HTTP/2.0"},
		{ts.HTTP, nil, "HTTP/1.1"},
	} {
		pc := cepv1connect.NewPatternServiceClient(tc.client, ts.URL, tc.opts...)
		if _, err := pc.ListPatterns(t.Context(), connect.NewRequest(&cepv1.ListPatternsRequest{})); err != nil {
			t.Fatal(err)
		}
		if got := proto.Load(); got != tc.want {
			t.Errorf("request arrived over %v, want %s", got, tc.want)
		}
	}
}

// TestServerConfig pins the settings streaming depends on.
func TestServerConfig(t *testing.T) {
	srv := Server(":0", http.NotFoundHandler())
	if srv.WriteTimeout != 0 || srv.ReadTimeout != 0 {
		t.Errorf("read/write timeouts %v/%v would cut Tail streams", srv.ReadTimeout, srv.WriteTimeout)
	}
	if srv.ReadHeaderTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Errorf("ReadHeaderTimeout %v, IdleTimeout %v: want both set", srv.ReadHeaderTimeout, srv.IdleTimeout)
	}
	if p := srv.Protocols; p == nil || !p.UnencryptedHTTP2() || !p.HTTP1() {
		t.Errorf("protocols %v: want HTTP/1 and unencrypted HTTP/2", p)
	}
}
