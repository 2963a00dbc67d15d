package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

func TestCallerKeyOf(t *testing.T) {
	h := func(auth string) http.Header {
		hd := http.Header{}
		if auth != "" {
			hd.Set("Authorization", auth)
		}
		return hd
	}
	peer := connect.Peer{Addr: "10.0.0.7:51234"}
	ok := withVerified(context.Background())
	a, a2, b := CallerKeyOf(ok, h("Bearer s3cret"), peer), CallerKeyOf(ok, h("bearer s3cret"), connect.Peer{Addr: "10.0.0.8:1"}), CallerKeyOf(ok, h("Bearer other"), peer)
	if a != a2 || a == b || !strings.HasPrefix(a, "token:") || strings.Contains(a, "s3cret") {
		t.Errorf("token keys: %q %q %q", a, a2, b)
	}
	if got := CallerKeyOf(ok, h(""), peer); got != "peer:10.0.0.7" {
		t.Errorf("no token: %q", got)
	}
	if got := CallerKeyOf(context.Background(), h("Bearer made-up"), peer); got != "peer:10.0.0.7" {
		t.Errorf("a token the server did not verify: %q, want the peer's key", got)
	}
	if got := CallerKeyOf(ok, h(""), connect.Peer{Addr: "10.0.0.7:9"}); got != "peer:10.0.0.7" {
		t.Errorf("same host, other port: %q", got)
	}
}
