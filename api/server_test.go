package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// startServerTimeout is startServer with a body timeout of d.
func startServerTimeout(t *testing.T, h http.Handler, d time.Duration) (*memListener, *testServer) {
	t.Helper()
	l := newMemListener()
	srv := server("memory", h, d)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	var h1, h2 http.Protocols
	h1.SetHTTP1(true)
	h2.SetUnencryptedHTTP2(true)
	ts := &testServer{URL: "http://memory",
		HTTP: &http.Client{Transport: &http.Transport{DialContext: l.DialContext, Protocols: &h1}},
		H2C:  &http.Client{Transport: &http.Transport{DialContext: l.DialContext, Protocols: &h2}}}
	t.Cleanup(func() {
		ts.HTTP.CloseIdleConnections()
		ts.H2C.CloseIdleConnections()
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return l, ts
}

// An attack that must fail: a client sends the headers of a unary call
// and then its body a byte now and then, holding a connection and a
// goroutine for as long as it likes. The body must arrive within the body
// timeout.
func TestSlowUnaryBodyIsCutOff(t *testing.T) {
	b, p, _, _, _, _ := allFakes()
	p.ValidateFunc = func(context.Context, *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
		return &cepv1.ValidatePatternResponse{}, nil
	}
	const timeout = 200 * time.Millisecond
	l, _ := startServerTimeout(t, NewHandler(b), timeout)
	conn, err := l.DialContext(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	go func() {
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: memory\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", cepv1connect.PatternServiceValidatePatternProcedure)
	}()
	// the client never sends the rest; without the timeout the server
	// waits for ever and this read gives up after 10 s
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		res.Body.Close()
	}
	took := time.Since(start)
	if took > 5*time.Second {
		t.Fatalf("the server still waited for the body after %v (%v)", took, err)
	}
	if err == nil && res.StatusCode == http.StatusOK {
		t.Fatalf("a call whose body never came succeeded")
	}
}

// The body timeout ends neither a unary call that takes long after its
// body arrived nor a stream that lasts: it is lifted once the body is
// read, and streams have none.
func TestBodyTimeoutSparesLongCalls(t *testing.T) {
	const timeout = 50 * time.Millisecond
	b, p, _, _, _, m := allFakes()
	p.ValidateFunc = func(ctx context.Context, _ *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
		select { // work that takes several body timeouts
		case <-time.After(4 * timeout):
			return &cepv1.ValidatePatternResponse{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.TailFunc = func(ctx context.Context, _ *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		for i := range 3 {
			if err := send(&cepv1.Record{Type: "match", Id: fmt.Sprint(i)}); err != nil {
				return err
			}
			select {
			case <-time.After(2 * timeout):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	_, ts := startServerTimeout(t, NewHandler(b), timeout)
	for _, pr := range protocols {
		pc := cepv1connect.NewPatternServiceClient(pr.http(ts), ts.URL, pr.opts...)
		if _, err := pc.ValidatePattern(t.Context(), connect.NewRequest(&cepv1.ValidatePatternRequest{Spec: strings.Repeat(" ", 1000)})); err != nil {
			t.Errorf("%s: a long unary call: %v", pr.name, err)
		}
		mc := cepv1connect.NewMatchServiceClient(pr.http(ts), ts.URL, pr.opts...)
		stream, err := mc.Tail(t.Context(), connect.NewRequest(&cepv1.TailRequest{Pattern: "p"}))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for stream.Receive() {
			n++
		}
		if stream.Err() != nil || n != 3 {
			t.Errorf("%s: a long stream: %d records, %v", pr.name, n, stream.Err())
		}
		stream.Close()
	}
}
