package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
)

var (
	// errUnauthenticated is the error a call without a valid token gets.
	errUnauthenticated = errors.New("api: missing or invalid bearer token")
	// errPermissionDenied is the error of a valid token whose role may not
	// make the call.
	errPermissionDenied = errors.New("api: the token's role may not make this call")
)

// WithToken returns a handler option that requires every call to carry the
// header "Authorization: Bearer TOKEN", token being an admin's. Calls
// without it fail with Unauthenticated. An empty token disables the check
// (the option does nothing). It is WithTokens of that one token.
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
	return WithTokens(single(token))
}

// WithTokens returns a handler option that lets a call through only when
// its bearer token's role may make it (AccessOf): Unauthenticated without
// a valid token, PermissionDenied when its role falls short. Tokens
// without any user token (Users) let every call through, as RoleAdmin.
// Health and reflection stay open, as with WithToken.
//
// An interceptor runs once Connect has read the request: a server should
// rather wrap its handler with Authorize, which decides on the headers.
func WithTokens(t *Tokens) connect.HandlerOption {
	return connect.WithInterceptors(&tokenChecker{t: t})
}

func single(token string) *Tokens {
	t := &Tokens{}
	if err := t.Add(RoleAdmin, token); err != nil {
		// a token Add refuses (white space) matches no header value, so
		// every call is refused, as it would be with any other wrong token
		t.list = append(t.list, tokenEntry{role: RoleNone})
	}
	return t
}

// RequireToken returns h behind the check WithToken makes, made on the
// request's headers before h reads a byte of its body: an interceptor runs
// only after Connect has read and decoded the request message, so without
// this anyone could make a node read large bodies without the token. The
// open procedures of WithToken (health, reflection) stay open. A refused
// call gets Unauthenticated in its own protocol (Connect, gRPC, gRPC-Web);
// anything else, such as a profile download, 401. An empty token returns
// h as it is. It is Authorize with that one admin token.
func RequireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	return Authorize(single(token), h)
}

// Authorize returns h behind the check of WithTokens, made on the
// request's headers before h reads a byte of its body; the procedure is
// the request's path, and a path the table does not list needs an admin.
// A refused call gets Unauthenticated or PermissionDenied in its own
// protocol (Connect, gRPC, gRPC-Web); anything else 401 or 403.
func Authorize(t *Tokens, h http.Handler) http.Handler {
	c := &tokenChecker{t: t}
	return guard(h, func(r *http.Request) (bool, error) { return c.check(r.URL.Path, r.Header) })
}

// AuthorizeRole is Authorize for a handler outside the API (metrics,
// profiles, the cluster's internal endpoints): every request needs a token
// of a role a allows. Without user tokens in t, a request without one
// counts as RoleAdmin.
func AuthorizeRole(t *Tokens, a Access, h http.Handler) http.Handler {
	c := &tokenChecker{t: t}
	return guard(h, func(r *http.Request) (bool, error) { return false, c.allow(r.URL.Path, a, r.Header) })
}

// guard serves h the requests check allows, those with a token it
// verified marked so (CallerKeyOf).
func guard(h http.Handler, check func(*http.Request) (verified bool, err error)) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verified, err := check(r)
		switch {
		case err == nil && verified:
			h.ServeHTTP(w, r.WithContext(withVerified(r.Context())))
		case err == nil:
			h.ServeHTTP(w, r)
		case ew.IsSupported(r):
			_ = ew.Write(w, r, err)
		case connect.CodeOf(err) == connect.CodePermissionDenied:
			http.Error(w, err.(*connect.Error).Message(), http.StatusForbidden)
		default:
			http.Error(w, errUnauthenticated.Error(), http.StatusUnauthorized)
		}
	})
}

// tokenChecker is the server side of WithTokens. It is immutable, so safe
// for concurrent use.
type tokenChecker struct {
	t *Tokens
}

func (c *tokenChecker) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		verified, err := c.check(req.Spec().Procedure, req.Header())
		if err != nil {
			return nil, err
		}
		if verified {
			ctx = withVerified(ctx)
		}
		return next(ctx, req)
	}
}

func (c *tokenChecker) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next // a handler option: never used on the client side
}

func (c *tokenChecker) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		verified, err := c.check(conn.Spec().Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		if verified {
			ctx = withVerified(ctx)
		}
		return next(ctx, conn)
	}
}

// openPrefixes are the procedures every caller may call, without a token.
var openPrefixes = []string{
	"/" + grpchealth.HealthV1ServiceName + "/",
	"/" + grpcreflect.ReflectV1ServiceName + "/",
	"/" + grpcreflect.ReflectV1AlphaServiceName + "/",
}

// check decides on a call to procedure; verified reports that its bearer
// token is one the server knows.
func (c *tokenChecker) check(procedure string, h http.Header) (verified bool, err error) {
	if token, ok := bearerToken(h); ok && c.t.Role(token) != RoleNone {
		verified = true
	}
	for _, p := range openPrefixes {
		if strings.HasPrefix(procedure, p) {
			return verified, nil
		}
	}
	a, _ := AccessOf(procedure)
	return verified, c.allow(procedure, a, h)
}

// allow decides on the role of the headers' token for what (a procedure
// or path), which a guards.
func (c *tokenChecker) allow(what string, a Access, h http.Header) error {
	role := RoleNone
	if token, ok := bearerToken(h); ok {
		role = c.t.Role(token)
	}
	if role == RoleNone && c.t.Users() == 0 {
		role = RoleAdmin // no user token: the API is open
	}
	switch {
	case role == RoleNone:
		// No WWW-Authenticate: gRPC carries error metadata in trailers,
		// where net/http refuses that header.
		return connect.NewError(connect.CodeUnauthenticated, errUnauthenticated)
	case !a.Allows(role):
		// the caller holds a valid token: it may learn what it lacks
		need := a.Least.String()
		if a.Least == RoleNode {
			need = "the cluster's node credential"
		}
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w: %s needs %s, the token is %s's", errPermissionDenied, what, need, role))
	}
	return nil
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
