package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// An in-memory network for handler tests: the server is the real [Server]
// (so its h2c configuration is what the gRPC clients exercise), listening on
// a listener whose connections are net.Pipe pairs.

// memListener is a net.Listener whose Dial hands one end of a net.Pipe to
// Accept. Safe for concurrent use.
type memListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

func (l *memListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "memory" }

// testServer is a running Server on a memListener.
type testServer struct {
	URL  string       // base URL for clients
	H2C  *http.Client // HTTP/2 with prior knowledge (gRPC needs it)
	HTTP *http.Client // HTTP/1.1 only
}

// startServer serves h until the test ends, then closes the clients and
// the server and waits for Serve to return.
func startServer(t testing.TB, h http.Handler) *testServer {
	t.Helper()
	l := newMemListener()
	srv := Server("memory", h)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	client := func(set func(*http.Protocols)) *http.Client {
		var p http.Protocols
		set(&p)
		return &http.Client{Transport: &http.Transport{DialContext: l.DialContext, Protocols: &p}}
	}
	ts := &testServer{
		URL:  "http://memory",
		H2C:  client(func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }),
		HTTP: client(func(p *http.Protocols) { p.SetHTTP1(true) }),
	}
	t.Cleanup(func() {
		ts.H2C.CloseIdleConnections()
		ts.HTTP.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
			srv.Close()
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ts
}

// protocol is one way a client can talk to the handler.
type protocol struct {
	name string
	http func(*testServer) *http.Client
	opts []connect.ClientOption
}

// protocols are the client configurations every handler test runs under:
// the three wire protocols, with both codecs, over the HTTP versions
// clients use for them.
var protocols = []protocol{
	{"connect-proto-h1", func(s *testServer) *http.Client { return s.HTTP }, nil},
	{"connect-json-h2c", func(s *testServer) *http.Client { return s.H2C }, []connect.ClientOption{connect.WithProtoJSON()}},
	{"grpc-h2c", func(s *testServer) *http.Client { return s.H2C }, []connect.ClientOption{connect.WithGRPC()}},
	{"grpc-json-h2c", func(s *testServer) *http.Client { return s.H2C }, []connect.ClientOption{connect.WithGRPC(), connect.WithProtoJSON()}},
	{"grpcweb-h1", func(s *testServer) *http.Client { return s.HTTP }, []connect.ClientOption{connect.WithGRPCWeb()}},
}

// with returns p's client options followed by extra.
func (p protocol) with(extra ...connect.ClientOption) []connect.ClientOption {
	return append(append([]connect.ClientOption(nil), p.opts...), extra...)
}
