package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"

	"connectrpc.com/connect"
)

type callerKey struct{}

type verifiedKey struct{}

// withVerified marks ctx as a call whose bearer token the server knows.
func withVerified(ctx context.Context) context.Context {
	return context.WithValue(ctx, verifiedKey{}, true)
}

// CallerKeyOf returns a stable name of the caller of a request, for limits
// per caller: "token:" and a hash of its bearer token when the server
// verified it (never the token itself, which must not reach logs or
// errors), else "peer:" and the host it calls from. A token the server
// does not know (any token, on an API without tokens) does not name the
// caller: else each made-up token would be a caller of its own, and its
// limits none.
func CallerKeyOf(ctx context.Context, h http.Header, peer connect.Peer) string {
	if token, ok := bearerToken(h); ok && token != "" && ctx.Value(verifiedKey{}) != nil {
		sum := sha256.Sum256([]byte(token))
		return "token:" + hex.EncodeToString(sum[:8])
	}
	host := peer.Addr
	if h, _, err := net.SplitHostPort(peer.Addr); err == nil {
		host = h
	}
	return "peer:" + host
}

func withCaller(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, callerKey{}, key)
}

// CallerKey is the CallerKeyOf of the call ctx belongs to, as the handlers
// give it to a backend; empty outside such a call.
func CallerKey(ctx context.Context) string {
	k, _ := ctx.Value(callerKey{}).(string)
	return k
}
