package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// A browser's preflight from an allowed origin is answered with the
// headers Connect clients need, before any token is checked; one from
// another origin, or to a server allowing none, gets no CORS header. The
// call itself still needs its token.
func TestCORS(t *testing.T) {
	b, p, _, _, _, _ := allFakes()
	p.GetFunc = func(context.Context, *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
		return &cepv1.GetPatternResponse{}, nil
	}
	tokens := &Tokens{}
	if err := tokens.Add(RoleReader, "reader-token"); err != nil {
		t.Fatal(err)
	}
	const allowed = "https://console.example.com"
	h := Authorize(tokens, NewHandler(b))
	withCORS := startServer(t, CORS([]string{allowed, "http://*.local.test:8080"}, h))
	without := startServer(t, CORS(nil, h))
	const proc = "/cep.v1.PatternService/GetPattern"

	preflight := func(ts *testServer, origin string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodOptions, ts.URL+proc, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,connect-protocol-version,content-type")
		res, err := ts.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for _, origin := range []string{allowed, "http://a.local.test:8080"} {
		res := preflight(withCORS, origin)
		if res.StatusCode/100 != 2 || res.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Fatalf("preflight from %s: %s, headers %v", origin, res.Status, res.Header)
		}
		got := strings.ToLower(res.Header.Get("Access-Control-Allow-Headers"))
		for _, want := range []string{"authorization", "connect-protocol-version", "content-type"} {
			if !strings.Contains(got, want) {
				t.Errorf("preflight from %s allows headers %q, not %s", origin, got, want)
			}
		}
		if res.Header.Get("Access-Control-Max-Age") == "" {
			t.Errorf("preflight from %s: no max age", origin)
		}
	}
	for _, c := range []struct {
		ts     *testServer
		origin string
	}{{withCORS, "https://evil.example.com"}, {withCORS, "https://console.example.com.evil.test"}, {withCORS, "http://a.local.test:9090"}, {without, allowed}} {
		res := preflight(c.ts, c.origin)
		for k := range res.Header {
			if strings.HasPrefix(k, "Access-Control-Allow") {
				t.Errorf("preflight from %s: %s %q", c.origin, k, res.Header.Get(k))
			}
		}
	}

	// the call from the allowed origin: CORS headers, and the token checked
	call := func(token string) (*connect.Response[cepv1.GetPatternResponse], error) {
		pc := cepv1connect.NewPatternServiceClient(withCORS.HTTP, withCORS.URL)
		req := connect.NewRequest(&cepv1.GetPatternRequest{Name: "p"})
		req.Header().Set("Origin", allowed)
		if token != "" {
			req.Header().Set("Authorization", "Bearer "+token)
		}
		return pc.GetPattern(t.Context(), req)
	}
	res, err := call("reader-token")
	if err != nil {
		t.Fatal(err)
	}
	if res.Header().Get("Access-Control-Allow-Origin") != allowed {
		t.Errorf("call from %s: headers %v", allowed, res.Header())
	}
	if _, err := call(""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("call without a token: %v, want Unauthenticated", err)
	}
}

func TestCheckOrigins(t *testing.T) {
	for _, ok := range []string{"*", "https://a.example.com", "http://localhost:3000", "https://*.example.com"} {
		if err := CheckOrigins([]string{ok}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "example.com", "ftp://a.example.com", "https://a.example.com/", "https://a.example.com/x", "https://*.*.com", "https://u@a.example.com", "https://", "https://*example.com", "https://a*.example.com", "https://a.*.example.com", "https://example.*", "*.example.com"} {
		err := CheckOrigins([]string{"https://fine.example.com", bad})
		if err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}
