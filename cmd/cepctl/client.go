package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// apiClients are the Connect clients of one command, speaking the Connect
// protocol (binary protobuf over HTTP/1.1 or HTTP/2). Their errors come back
// already translated by friendlyError.
type apiClients struct {
	patterns   cepv1connect.PatternServiceClient
	sources    cepv1connect.SourceServiceClient
	cluster    cepv1connect.ClusterServiceClient
	savepoints cepv1connect.SavepointServiceClient
	matches    cepv1connect.MatchServiceClient
}

func newClients(d *deps, g globalOptions) *apiClients {
	hc := d.httpClient
	if hc == nil {
		hc = http.DefaultClient
	}
	server := g.Server
	if len(g.Servers) > 1 {
		c := *hc
		c.Transport = newFailover(hc.Transport, g.Servers)
		hc, server = &c, "any of "+strings.Join(g.Servers, ", ")
	}
	opts := []connect.ClientOption{
		connect.WithInterceptors(errorTranslator{server: server, hasToken: g.Token != ""}, retrier{budget: retryBudget}),
		api.WithClientToken(g.Token),
	}
	return &apiClients{
		patterns:   cepv1connect.NewPatternServiceClient(hc, g.Server, opts...),
		sources:    cepv1connect.NewSourceServiceClient(hc, g.Server, opts...),
		cluster:    cepv1connect.NewClusterServiceClient(hc, g.Server, opts...),
		savepoints: cepv1connect.NewSavepointServiceClient(hc, g.Server, opts...),
		matches:    cepv1connect.NewMatchServiceClient(hc, g.Server, opts...),
	}
}

// rpcError is an API error rewritten for people; Unwrap gives the
// *connect.Error, so callers can still branch on its code.
type rpcError struct {
	msg string
	err error
}

func (e *rpcError) Error() string { return e.msg }
func (e *rpcError) Unwrap() error { return e.err }

// friendlyError rewrites err, the error of a call of procedure on server:
//
//	the client could not talk to the server   → cannot reach the server at URL: cause
//	a URL that does not serve the procedure   → the server at URL does not serve ...
//	Unauthenticated                           → the server needs a token (--token-file, ...)
//	Unavailable sent by the server            → the cluster is unavailable: message
//	Internal, Unknown                         → server error: message
//	Canceled                                  → interrupted
//	anything else (NotFound, InvalidArgument, AlreadyExists, ...) → the server's message
//
// Errors that are not *connect.Error pass through unchanged.
func friendlyError(server, procedure string, hasToken bool, err error) error {
	var ce *connect.Error
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	msg := ce.Message()
	if errors.Is(err, context.Canceled) || ce.Code() == connect.CodeCanceled && connect.IsWireError(ce) {
		// (Connect also reports a connection reset by the server as
		// canceled: that one is an unreachable server, below)
		return &rpcError{"interrupted", err}
	}
	if !connect.IsWireError(ce) {
		switch ce.Code() {
		case connect.CodeUnimplemented:
			// An HTTP 404 from something that is not a cep node.
			return &rpcError{fmt.Sprintf("the server at %s does not serve %s: is it a cep node's API address?", server, procedure), err}
		case connect.CodeDeadlineExceeded:
			return &rpcError{"timed out: " + msg, err}
		}
		if op := new(net.OpError); errors.As(err, &op) {
			msg = op.Error()
		}
		switch {
		case strings.HasPrefix(server, "http://") && strings.Contains(msg, "400 Bad Request"):
			// what a TLS port answers to plain HTTP
			msg += " (if the cluster serves HTTPS: --server https://HOST:PORT, with --tls-ca for a private CA)"
		case strings.HasPrefix(server, "https://") && !strings.Contains(msg, "certificate") &&
			(strings.Contains(msg, "reset by peer") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "could not be established")):
			// with TLS 1.3 a client learns only after the handshake that
			// the server wanted its certificate: the server hangs up
			msg += " (if the server requires a client certificate: --tls-cert and --tls-key)"
		}
		return &rpcError{fmt.Sprintf("cannot reach the server at %s: %s", server, msg), err}
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		if hasToken {
			return &rpcError{"the server rejected the token (--token, --token-file or config)", err}
		}
		return &rpcError{"the server needs a token (--token-file, CEPCTL_TOKEN, --token or config)", err}
	case connect.CodePermissionDenied:
		return &rpcError{"permission denied: " + msg, err}
	case connect.CodeUnavailable:
		// (the retrier has already tried again where that was safe)
		return &rpcError{"the cluster is unavailable: " + msg, err}
	case connect.CodeUnimplemented:
		return &rpcError{fmt.Sprintf("the server at %s does not implement %s: %s", server, procedure, msg), err}
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss:
		return &rpcError{"server error: " + msg, err}
	case connect.CodeDeadlineExceeded:
		return &rpcError{"timed out: " + msg, err}
	}
	if msg == "" {
		msg = ce.Code().String()
	}
	return &rpcError{msg, err}
}

// errorTranslator is a client interceptor that passes every error through
// friendlyError. It is immutable and safe for concurrent use.
type errorTranslator struct {
	server   string
	hasToken bool
}

func (t errorTranslator) translate(procedure string, err error) error {
	return friendlyError(t.server, strings.TrimPrefix(procedure, "/"), t.hasToken, err)
}

func (t errorTranslator) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil {
			return nil, t.translate(req.Spec().Procedure, err)
		}
		return res, nil
	}
}

func (t errorTranslator) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		return &translatedConn{StreamingClientConn: next(ctx, spec), t: t}
	}
}

func (t errorTranslator) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next // a client interceptor
}

// translatedConn translates a stream's errors, except io.EOF, which marks
// the end of the stream (Send) or of the messages (Receive).
type translatedConn struct {
	connect.StreamingClientConn
	t errorTranslator
}

func (c *translatedConn) Send(m any) error { return c.wrap(c.StreamingClientConn.Send(m)) }

func (c *translatedConn) Receive(m any) error { return c.wrap(c.StreamingClientConn.Receive(m)) }

func (c *translatedConn) wrap(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	return c.t.translate(c.Spec().Procedure, err)
}

// retryBudget bounds how long a call is retried while the cluster is
// unavailable before its error is shown (a variable for the tests).
var retryBudget = 10 * time.Second

const (
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = time.Second
)

// retrier is a client interceptor that calls again, with a backoff and for
// up to budget, what the cluster answered it could not do for a moment
// (Unavailable): a call without side effects (the protos'
// idempotency_level), a change with a request id (which the cluster
// applies once, however often it is sent: the retrier gives every change
// that takes one an id of its own, kept across its tries), and a change
// the server says it did not apply ("not applied" in the message: a node
// that knows no metadata leader, or is no longer it). Another change that
// may have been applied is not sent again, nor is a call to a server that
// cannot be reached (a wrong address should not wait; tail resumes on its
// own). Streams pass through.
type retrier struct{ budget time.Duration }

func (r retrier) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		end := time.Now().Add(r.budget)
		backoff := retryBackoffMin
		hasID := withRequestID(req.Any())
		for {
			res, err := next(ctx, req)
			if err == nil || !(retryable(req.Spec(), err) || hasID && unavailable(err)) || ctx.Err() != nil || time.Now().Add(backoff).After(end) {
				return res, err
			}
			select {
			case <-ctx.Done():
				return res, err
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, retryBackoffMax)
		}
	}
}

func (r retrier) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (r retrier) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// withRequestID gives msg a request id of its own when it has the
// request_id field and the caller left it empty, and reports whether it
// has one now.
func withRequestID(msg any) bool {
	m, ok := msg.(proto.Message)
	if !ok {
		return false
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("request_id")
	if fd == nil || fd.Kind() != protoreflect.StringKind {
		return false
	}
	if r.Get(fd).String() == "" {
		b := make([]byte, 16)
		rand.Read(b)
		r.Set(fd, protoreflect.ValueOfString("cepctl-"+hex.EncodeToString(b)))
	}
	return true
}

// unavailable reports whether the server answered err as Unavailable.
func unavailable(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && connect.IsWireError(ce) && ce.Code() == connect.CodeUnavailable
}

// retryable reports whether a call of spec that failed with err may be
// sent again (see retrier).
func retryable(spec connect.Spec, err error) bool {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	noSideEffects := spec.IdempotencyLevel != connect.IdempotencyUnknown
	return connect.IsWireError(ce) && ce.Code() == connect.CodeUnavailable && (noSideEffects || strings.Contains(ce.Message(), "not applied"))
}
