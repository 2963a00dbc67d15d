package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// DefaultReadMaxBytes caps a request message's size unless an option passed
// to NewHandler says otherwise (connect.WithReadMaxBytes). Specs and
// requests are small; this keeps a stray upload from filling memory.
const DefaultReadMaxBytes = 4 << 20

// NewHandler returns an http.Handler serving every service whose backend is
// set in b, plus gRPC health checking (grpc.health.v1.Health, reporting
// SERVING for the server and each mounted service, or NOT_SERVING while
// b.Ready fails) and server reflection
// (grpc.reflection.v1 and v1alpha, listing the mounted services and health),
// over the Connect, gRPC and gRPC-Web protocols. opts apply to every one of
// them, after a default read limit of DefaultReadMaxBytes.
//
// gRPC needs HTTP/2: serve the handler with [Server], or over TLS. The
// handler is safe for concurrent use if the backends are.
func NewHandler(b Backends, opts ...connect.HandlerOption) http.Handler {
	opts = append([]connect.HandlerOption{connect.WithReadMaxBytes(DefaultReadMaxBytes)}, opts...)
	mux := http.NewServeMux()
	var names []string // fully-qualified names of the mounted services
	mount := func(path string, h http.Handler) {
		mux.Handle(path, h)
		names = append(names, strings.Trim(path, "/")) // path is "/cep.v1.XService/"
	}
	if b.Patterns != nil {
		mount(cepv1connect.NewPatternServiceHandler(&patternHandler{b.Patterns}, opts...))
	}
	if b.Sources != nil {
		mount(cepv1connect.NewSourceServiceHandler(&sourceHandler{b.Sources}, opts...))
	}
	if b.Cluster != nil {
		mount(cepv1connect.NewClusterServiceHandler(&clusterHandler{b.Cluster}, opts...))
	}
	if b.Savepoints != nil {
		mount(cepv1connect.NewSavepointServiceHandler(&savepointHandler{b.Savepoints}, opts...))
	}
	if b.Matches != nil {
		path, h := cepv1connect.NewMatchServiceHandler(&matchHandler{b.Matches}, opts...)
		mount(path, withResponseController(h))
	}

	mux.Handle(grpchealth.NewHandler(newReadyChecker(b.Ready, names), opts...))
	reflector := grpcreflect.NewStaticReflector(append(names, grpchealth.HealthV1ServiceName)...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, opts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	return mux
}

// readyChecker answers gRPC health checks from a readiness function, for
// the server ("") and each mounted service alike: they share the node.
type readyChecker struct {
	ready    func() error
	services map[string]bool
}

func newReadyChecker(ready func() error, names []string) *readyChecker {
	c := &readyChecker{ready: ready, services: map[string]bool{"": true}}
	for _, n := range names {
		c.services[n] = true
	}
	return c
}

func (c *readyChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if !c.services[req.Service] {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if c.ready != nil && c.ready() != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// Limits of the API server, against clients that hold connections and
// goroutines without finishing their requests (slowloris):
const (
	// ReadHeaderTimeout bounds the time a request's headers may take to
	// arrive.
	ReadHeaderTimeout = 10 * time.Second
	// BodyReadTimeout bounds the time the body of a unary call (every
	// procedure but the streaming ones, such as MatchService.Tail) may
	// take to arrive: at most DefaultReadMaxBytes, which takes seconds even
	// over slow links. It runs from the end of the headers; once the body
	// is read the call may take as long as it needs (a node removal
	// waiting for its replicas to move).
	BodyReadTimeout = 30 * time.Second
	// IdleTimeout closes a keep-alive connection without a request.
	IdleTimeout = 2 * time.Minute
)

// Server returns an *http.Server for h on addr that speaks HTTP/1.1 and
// HTTP/2 over cleartext (h2c with prior knowledge, which gRPC clients use),
// or over TLS when it serves a crypto/tls listener offering "h2".
// The caller starts it (ListenAndServe, or Serve on its own listener) and
// stops it with Shutdown.
//
// Timeouts: request headers must arrive within ReadHeaderTimeout, the body
// of a unary call within BodyReadTimeout, and idle connections are closed
// after IdleTimeout. There is no read or write timeout for the whole
// request, since MatchService.Tail streams for as long as the client wants
// and a unary call may wait long for the cluster; per-call deadlines come
// from the client (Connect-Timeout-Ms, grpc-timeout). An HTTP/2 connection
// that sends nothing for 30s is pinged and closed if the ping is not
// answered within 15s, which ends the streams of clients that vanished
// without closing.
func Server(addr string, h http.Handler) *http.Server {
	return server(addr, h, BodyReadTimeout)
}

func server(addr string, h http.Handler, bodyTimeout time.Duration) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           bodyDeadline(h, bodyTimeout),
		Protocols:         &protocols,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
}

// streaming are the procedures of the API whose client or server streams.
var streaming = func() map[string]bool {
	m := map[string]bool{}
	for _, md := range apiMethods() {
		if md.IsStreamingClient() || md.IsStreamingServer() {
			m[procedureOf(md)] = true
		}
	}
	return m
}()

// bodyDeadline has the body of a request to a unary procedure arrive
// within d of its headers: a read after that fails, and the call with it.
// The deadline is lifted once the body has been read to its end (net/http
// does so as well on HTTP/1.1), so that it never ends a call that waits
// for the cluster. It stays after an error: the server then discards the
// rest of the body, which must not wait for the client either. Streams and
// other paths go as they are.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if streaming[r.URL.Path] || r.Body == nil || r.Body == http.NoBody || !isProcedure(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) != nil {
			h.ServeHTTP(w, r) // a writer without deadlines (a test's)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		h.ServeHTTP(w, r)
	})
}

// isProcedure reports whether path names a procedure of the API (or one
// of a service of it, known or not).
func isProcedure(path string) bool {
	return strings.HasPrefix(path, "/cep.v1.")
}

type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

type responseControllerKey struct{}

// withResponseController gives the calls of h their response's
// controller, for AbortResponse.
func withResponseController(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), responseControllerKey{}, rc)))
	})
}

// AbortResponse makes every write of the response of the streaming call
// ctx belongs to fail from now on, so that a Send blocked on a client that
// does not read returns (with an error) and the backend can end the
// stream; the client's connection or stream is broken off. It fails when
// ctx is not such a call's or the connection cannot set write deadlines.
func AbortResponse(ctx context.Context) error {
	rc, ok := ctx.Value(responseControllerKey{}).(*http.ResponseController)
	if !ok {
		return errors.New("api: not a streaming call's context")
	}
	return rc.SetWriteDeadline(time.Now())
}
