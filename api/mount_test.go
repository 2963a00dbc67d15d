package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// protoServices returns every service the cep.v1 protos declare, from the
// generated descriptors, so a service added to a .proto is covered here
// without editing the test.
func protoServices(t *testing.T) []protoreflect.ServiceDescriptor {
	t.Helper()
	_ = cepv1.File_cep_v1_pattern_proto // make sure the package is linked in
	var svcs []protoreflect.ServiceDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("cep.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			svcs = append(svcs, fd.Services().Get(i))
		}
		return true
	})
	if len(svcs) < 5 {
		t.Fatalf("found %d services in package cep.v1, want at least 5", len(svcs))
	}
	slices.SortFunc(svcs, func(a, b protoreflect.ServiceDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	return svcs
}

func listServices(t *testing.T, hc connect.HTTPClient, url string, opts ...connect.ClientOption) []string {
	t.Helper()
	stream := grpcreflect.NewClient(hc, url, opts...).NewStream(t.Context())
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatalf("ListServices: %v", err)
	}
	var got []string
	for _, n := range names {
		got = append(got, string(n))
	}
	slices.Sort(got)
	return got
}

// TestEveryServiceMounted checks that reflection lists exactly the services
// in the protos (plus health), and that every method of every one of them
// is routed to a handler: called with an empty message, none answers
// Unimplemented.
func TestEveryServiceMounted(t *testing.T) {
	b, _, _, _, _, _ := allFakes()
	ts := startServer(t, NewHandler(b))

	want := []string{grpchealth.HealthV1ServiceName}
	for _, svc := range protoServices(t) {
		want = append(want, string(svc.FullName()))
	}
	slices.Sort(want)
	if got := listServices(t, ts.H2C, ts.URL, connect.WithGRPC()); !slices.Equal(got, want) {
		t.Errorf("reflection lists %v, want %v", got, want)
	}

	for _, svc := range protoServices(t) {
		for i := range svc.Methods().Len() {
			md := svc.Methods().Get(i)
			procedure := "/" + string(svc.FullName()) + "/" + string(md.Name())
			// An empty message is a valid encoding of every request type.
			client := connect.NewClient[emptypb.Empty, emptypb.Empty](ts.H2C, ts.URL+procedure, connect.WithGRPC())
			var err error
			switch {
			case md.IsStreamingClient():
				t.Fatalf("%s: client streaming is not covered by this test", procedure)
			case md.IsStreamingServer():
				stream, serr := client.CallServerStream(t.Context(), connect.NewRequest(&emptypb.Empty{}))
				if serr == nil {
					for stream.Receive() {
					}
					serr = stream.Err()
					stream.Close()
				}
				err = serr
			default:
				_, err = client.CallUnary(t.Context(), connect.NewRequest(&emptypb.Empty{}))
			}
			// The fakes' methods are unset, so a routed call fails Internal.
			if code := connect.CodeOf(err); code != connect.CodeInternal {
				t.Errorf("%s: got %v, want the fake's internal error (routed to its backend)", procedure, err)
			}
		}
	}
}

// TestNilBackendsNotMounted checks that only services with a backend are
// served, reported healthy and listed.
func TestNilBackendsNotMounted(t *testing.T) {
	ts := startServer(t, NewHandler(Backends{Cluster: &fakeCluster{}}))
	want := []string{cepv1connect.ClusterServiceName, grpchealth.HealthV1ServiceName}
	if got := listServices(t, ts.H2C, ts.URL, connect.WithGRPC()); !slices.Equal(got, want) {
		t.Errorf("reflection lists %v, want %v", got, want)
	}
	pc := cepv1connect.NewPatternServiceClient(ts.H2C, ts.URL, connect.WithGRPC())
	_, err := pc.GetPattern(t.Context(), connect.NewRequest(&cepv1.GetPatternRequest{Name: "p"}))
	if code := connect.CodeOf(err); code != connect.CodeUnimplemented {
		t.Errorf("unmounted PatternService: got %v, want unimplemented", err)
	}
	hc := grpchealth.NewClient(ts.H2C, ts.URL, connect.WithGRPC())
	_, err = hc.Check(t.Context(), &grpchealth.CheckRequest{Service: cepv1connect.PatternServiceName})
	if code := connect.CodeOf(err); code != connect.CodeNotFound {
		t.Errorf("health of unmounted PatternService: got %v, want not found", err)
	}
}

// TestHealth checks SERVING for the server as a whole and each service,
// over gRPC and Connect.
func TestHealth(t *testing.T) {
	b, _, _, _, _, _ := allFakes()
	ts := startServer(t, NewHandler(b))
	services := []string{""} // the server as a whole
	for _, svc := range protoServices(t) {
		services = append(services, string(svc.FullName()))
	}
	for _, opts := range [][]connect.ClientOption{{connect.WithGRPC()}, nil} {
		hc := grpchealth.NewClient(ts.H2C, ts.URL, opts...)
		for _, name := range services {
			res, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: name})
			if err != nil {
				t.Errorf("Check(%q): %v", name, err)
				continue
			}
			if res.Status != grpchealth.StatusServing {
				t.Errorf("Check(%q) = %v, want serving", name, res.Status)
			}
		}
	}
}

// TestReflectionV1Alpha checks the v1alpha reflection service, which older
// grpcurl versions use: with v1 hidden, the reflection client falls back to
// v1alpha and must get the same answer.
func TestReflectionV1Alpha(t *testing.T) {
	b, _, _, _, _, _ := allFakes()
	inner := NewHandler(b)
	var alpha atomic.Int32
	v1Path := "/" + grpcreflect.ReflectV1ServiceName + "/"
	v1AlphaPath := "/" + grpcreflect.ReflectV1AlphaServiceName + "/"
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, v1Path):
			http.NotFound(w, r) // as a server without v1 answers
			return
		case strings.HasPrefix(r.URL.Path, v1AlphaPath):
			alpha.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	got := listServices(t, ts.H2C, ts.URL, connect.WithGRPC())
	if alpha.Load() == 0 {
		t.Fatal("the client never called v1alpha")
	}
	if !slices.Contains(got, cepv1connect.PatternServiceName) || !slices.Contains(got, cepv1connect.MatchServiceName) {
		t.Errorf("v1alpha lists %v", got)
	}

	// The descriptors it serves are complete enough for a client to build
	// requests from (grpcurl describe).
	stream := grpcreflect.NewClient(ts.H2C, ts.URL, connect.WithGRPC()).NewStream(t.Context())
	defer stream.Close()
	files, err := stream.FileContainingSymbol(cepv1connect.SavepointServiceName)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"cep/v1/savepoint.proto", "google/protobuf/timestamp.proto"} {
		if !slices.Contains(names, want) {
			t.Errorf("FileContainingSymbol(SavepointService) gave %v, missing %s", names, want)
		}
	}
}

// TestToken checks bearer-token auth on unary and streaming calls under
// every protocol, and that health and reflection stay open: as an
// interceptor (WithToken) and in front of the handler (RequireToken).
func TestToken(t *testing.T) {
	t.Run("interceptor", func(t *testing.T) {
		testToken(t, func(token string, b Backends) http.Handler { return NewHandler(b, WithToken(token)) })
	})
	t.Run("in front", func(t *testing.T) {
		testToken(t, func(token string, b Backends) http.Handler { return RequireToken(token, NewHandler(b)) })
	})
}

func testToken(t *testing.T, serve func(token string, b Backends) http.Handler) {
	const token = "s3cret-token"
	b, p, _, _, _, m := allFakes()
	var calls atomic.Int32
	p.GetFunc = func(context.Context, *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
		calls.Add(1)
		return &cepv1.GetPatternResponse{Pattern: &cepv1.Pattern{Name: "p"}}, nil
	}
	m.TailFunc = func(_ context.Context, _ *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		calls.Add(1)
		return send(&cepv1.Record{Type: "match"})
	}
	ts := startServer(t, serve(token, b))

	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				opts []connect.ClientOption
				ok   bool
			}{
				{"none", nil, false},
				{"wrong", []connect.ClientOption{WithClientToken("s3cret-tokeN")}, false},
				{"prefix", []connect.ClientOption{WithClientToken("s3cret")}, false},
				{"right", []connect.ClientOption{WithClientToken(token)}, true},
			} {
				before := calls.Load()
				opts := pr.with(tc.opts...)
				pc := cepv1connect.NewPatternServiceClient(pr.http(ts), ts.URL, opts...)
				_, err := pc.GetPattern(t.Context(), connect.NewRequest(&cepv1.GetPatternRequest{Name: "p"}))
				checkAuth(t, tc.name+" unary", err, tc.ok)

				mc := cepv1connect.NewMatchServiceClient(pr.http(ts), ts.URL, opts...)
				stream, err := mc.Tail(t.Context(), connect.NewRequest(&cepv1.TailRequest{Pattern: "p"}))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for stream.Receive() {
					n++
				}
				checkAuth(t, tc.name+" stream", stream.Err(), tc.ok)
				if tc.ok && n != 1 {
					t.Errorf("%s stream: got %d records, want 1", tc.name, n)
				}
				stream.Close()

				wantCalls := int32(0)
				if tc.ok {
					wantCalls = 2
				}
				if got := calls.Load() - before; got != wantCalls {
					t.Errorf("%s: backend called %d times, want %d", tc.name, got, wantCalls)
				}
			}
		})
	}

	// Probes and grpcurl need no token.
	res, err := grpchealth.NewClient(ts.H2C, ts.URL, connect.WithGRPC()).Check(t.Context(), &grpchealth.CheckRequest{})
	if err != nil || res.Status != grpchealth.StatusServing {
		t.Errorf("health without token: %v, %v", res, err)
	}
	if got := listServices(t, ts.H2C, ts.URL, connect.WithGRPC()); len(got) != 6 {
		t.Errorf("reflection without token lists %v", got)
	}
}

func checkAuth(t *testing.T, name string, err error, ok bool) {
	t.Helper()
	if ok {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return
	}
	checkError(t, name, err, connect.CodeUnauthenticated, errUnauthenticated.Error())
}

func TestWithTokenEmptyDisablesAuth(t *testing.T) {
	b, p, _, _, _, _ := allFakes()
	p.ListFunc = func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
		return &cepv1.ListPatternsResponse{}, nil
	}
	ts := startServer(t, NewHandler(b, WithToken("")))
	pc := cepv1connect.NewPatternServiceClient(ts.H2C, ts.URL, connect.WithGRPC(), WithClientToken(""))
	if _, err := pc.ListPatterns(t.Context(), connect.NewRequest(&cepv1.ListPatternsRequest{})); err != nil {
		t.Fatal(err)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header string
		token  string
		ok     bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc ", "abc", true},
		{"Bearer ", "", true},
		{"Bearer", "", false},
		{"Basic abc", "", false},
		{"", "", false},
		{"abc", "", false},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Authorization", tc.header)
		}
		token, ok := bearerToken(h)
		if token != tc.token || ok != tc.ok {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}

// countingBody records how much of a request body the server read.
type countingBody struct {
	left int
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), b.left)
	for i := range n {
		p[i] = ' '
	}
	b.left -= n
	b.read.Add(int64(n))
	return n, nil
}

func (b *countingBody) Close() error { return nil }

// An attack that must fail: a caller without the token makes the node read
// megabytes of request body (40 of them took 260 MB before the check came
// before the body). RequireToken answers from the headers alone.
func TestRequireTokenReadsNoBodyWithoutIt(t *testing.T) {
	b, p, _, _, _, _ := allFakes()
	p.ValidateFunc = func(context.Context, *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
		return &cepv1.ValidatePatternResponse{}, nil
	}
	h := RequireToken("s3cret", NewHandler(b))
	for _, tc := range []struct {
		name, auth string
		code       int
		read       bool
	}{
		{"none", "", http.StatusUnauthorized, false},
		{"wrong", "Bearer nope", http.StatusUnauthorized, false},
		{"right", "Bearer s3cret", http.StatusOK, true},
	} {
		body := &countingBody{left: 1 << 20}
		req := httptest.NewRequest(http.MethodPost, "/cep.v1.PatternService/ValidatePattern", body)
		req.Header.Set("Content-Type", "application/json")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			// the right token gets past the check: the 1 MiB of spaces is
			// not JSON, which Connect says with its own code
			if !(tc.read && rec.Code != http.StatusUnauthorized) {
				t.Errorf("%s: HTTP %d, want %d: %s", tc.name, rec.Code, tc.code, rec.Body)
			}
		}
		if got := body.read.Load(); tc.read != (got > 0) {
			t.Errorf("%s: the server read %d bytes of the body", tc.name, got)
		}
		if !tc.read && !strings.Contains(rec.Body.String(), "unauthenticated") {
			t.Errorf("%s: %s, want a Connect unauthenticated error", tc.name, rec.Body)
		}
	}
	// health stays open
	req := httptest.NewRequest(http.MethodPost, "/grpc.health.v1.Health/Check", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("health without the token: HTTP %d %s", rec.Code, rec.Body)
	}
	// a plain GET (a profile) gets 401
	rec = httptest.NewRecorder()
	RequireToken("s3cret", http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("GET without the token: HTTP %d", rec.Code)
	}
}
