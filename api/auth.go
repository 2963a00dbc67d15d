package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
)

// errUnauthenticated is the error a call without the right token gets.
var errUnauthenticated = errors.New("api: missing or invalid bearer token")

// WithToken returns a handler option that requires every call to carry the
// header "Authorization: Bearer TOKEN". Calls without it fail with
// Unauthenticated. An empty token disables the check (the option does
// nothing).
//
// Health checks and server reflection stay open even when NewHandler passes
// the option to them, so that liveness probes and grpcurl work without a
// secret; neither reveals more than the public API definition and whether
// the node is serving.
//
// The comparison takes the same time whatever the offered token is.
func WithToken(token string) connect.HandlerOption {
	if token == "" {
		return connect.WithInterceptors()
	}
	return connect.WithInterceptors(&tokenChecker{want: sha256.Sum256([]byte(token))})
}

// RequireToken returns h behind the check WithToken makes, made on the
// request's headers before h reads a byte of its body: an interceptor runs
// only after Connect has read and decoded the request message, so without
// this anyone could make a node read large bodies without the token. The
// open procedures of WithToken (health, reflection) stay open. A refused
// call gets Unauthenticated in its own protocol (Connect, gRPC, gRPC-Web);
// anything else, such as a profile download, 401. An empty token returns
// h as it is.
func RequireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	c := &tokenChecker{want: sha256.Sum256([]byte(token))}
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := c.check(r.URL.Path, r.Header)
		switch {
		case err == nil:
			h.ServeHTTP(w, r)
		case ew.IsSupported(r):
			_ = ew.Write(w, r, err)
		default:
			http.Error(w, errUnauthenticated.Error(), http.StatusUnauthorized)
		}
	})
}

// tokenChecker is the server side of WithToken. It is immutable, so safe for
// concurrent use.
type tokenChecker struct {
	want [sha256.Size]byte // hashed so that comparison time does not depend on length
}

func (c *tokenChecker) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := c.check(req.Spec().Procedure, req.Header()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (c *tokenChecker) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next // a handler option: never used on the client side
}

func (c *tokenChecker) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := c.check(conn.Spec().Procedure, conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// openPrefixes are the procedures WithToken lets through without a token.
var openPrefixes = []string{
	"/" + grpchealth.HealthV1ServiceName + "/",
	"/" + grpcreflect.ReflectV1ServiceName + "/",
	"/" + grpcreflect.ReflectV1AlphaServiceName + "/",
}

func (c *tokenChecker) check(procedure string, h http.Header) error {
	for _, p := range openPrefixes {
		if strings.HasPrefix(procedure, p) {
			return nil
		}
	}
	token, ok := bearerToken(h)
	got := sha256.Sum256([]byte(token))
	if ok && subtle.ConstantTimeCompare(got[:], c.want[:]) == 1 {
		return nil
	}
	// No WWW-Authenticate: gRPC carries error metadata in trailers, where
	// net/http refuses that header.
	return connect.NewError(connect.CodeUnauthenticated, errUnauthenticated)
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header.
// The scheme is case-insensitive (RFC 6750 §2.1, RFC 9110 §11.1).
func bearerToken(h http.Header) (string, bool) {
	const scheme = "bearer "
	v := h.Get("Authorization")
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	return strings.TrimSpace(v[len(scheme):]), true
}

// WithClientToken returns a client option that sends "Authorization: Bearer
// TOKEN" on every call, for clients of a server configured with WithToken.
// An empty token sends nothing.
func WithClientToken(token string) connect.ClientOption {
	if token == "" {
		return connect.WithInterceptors()
	}
	return connect.WithInterceptors(clientToken("Bearer " + token))
}

// clientToken is the client side of WithToken: the Authorization header value.
type clientToken string

func (t clientToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			req.Header().Set("Authorization", string(t))
		}
		return next(ctx, req)
	}
}

func (t clientToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(t))
		return conn
	}
}

func (t clientToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next // a client option: never used on the handler side
}
