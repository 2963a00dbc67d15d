package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// Fake backends for an in-process API server: each method calls its XxxFunc
// field, or fails with errUnset (Internal at the client) when the test left
// it nil.

var errUnset = errors.New("fake: method not set by the test")

func callFake[Req, Res any](f func(context.Context, *Req) (*Res, error), ctx context.Context, req *Req) (*Res, error) {
	if f == nil {
		return nil, errUnset
	}
	return f(ctx, req)
}

var (
	_ api.PatternBackend   = (*fakePatterns)(nil)
	_ api.SourceBackend    = (*fakeSources)(nil)
	_ api.ClusterBackend   = (*fakeCluster)(nil)
	_ api.SavepointBackend = (*fakeSavepoints)(nil)
	_ api.MatchBackend     = (*fakeMatches)(nil)
)

type fakePatterns struct {
	ValidateFunc func(context.Context, *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error)
	DeployFunc   func(context.Context, *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error)
	UpdateFunc   func(context.Context, *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error)
	DeleteFunc   func(context.Context, *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error)
	ListFunc     func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error)
	GetFunc      func(context.Context, *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error)
}

func (f *fakePatterns) Validate(ctx context.Context, r *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
	return callFake(f.ValidateFunc, ctx, r)
}

func (f *fakePatterns) Deploy(ctx context.Context, r *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
	return callFake(f.DeployFunc, ctx, r)
}

func (f *fakePatterns) Update(ctx context.Context, r *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
	return callFake(f.UpdateFunc, ctx, r)
}

func (f *fakePatterns) Delete(ctx context.Context, r *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
	return callFake(f.DeleteFunc, ctx, r)
}

func (f *fakePatterns) List(ctx context.Context, r *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
	return callFake(f.ListFunc, ctx, r)
}

func (f *fakePatterns) Get(ctx context.Context, r *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
	return callFake(f.GetFunc, ctx, r)
}

type fakeSources struct {
	CreateFunc func(context.Context, *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error)
	ListFunc   func(context.Context, *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error)
	GetFunc    func(context.Context, *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error)
}

func (f *fakeSources) Create(ctx context.Context, r *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error) {
	return callFake(f.CreateFunc, ctx, r)
}

func (f *fakeSources) List(ctx context.Context, r *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error) {
	return callFake(f.ListFunc, ctx, r)
}

func (f *fakeSources) Get(ctx context.Context, r *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error) {
	return callFake(f.GetFunc, ctx, r)
}

type fakeCluster struct {
	StatusFunc func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error)
	ShardsFunc func(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error)
}

func (f *fakeCluster) Status(ctx context.Context, r *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
	return callFake(f.StatusFunc, ctx, r)
}

func (f *fakeCluster) Shards(ctx context.Context, r *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
	return callFake(f.ShardsFunc, ctx, r)
}

type fakeSavepoints struct {
	CreateFunc  func(context.Context, *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error)
	ListFunc    func(context.Context, *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error)
	RestoreFunc func(context.Context, *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error)
}

func (f *fakeSavepoints) Create(ctx context.Context, r *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error) {
	return callFake(f.CreateFunc, ctx, r)
}

func (f *fakeSavepoints) List(ctx context.Context, r *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error) {
	return callFake(f.ListFunc, ctx, r)
}

func (f *fakeSavepoints) Restore(ctx context.Context, r *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error) {
	return callFake(f.RestoreFunc, ctx, r)
}

type fakeMatches struct {
	TailFunc func(context.Context, *cepv1.TailRequest, func(*cepv1.Record) error) error
}

func (f *fakeMatches) Tail(ctx context.Context, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
	if f.TailFunc == nil {
		return errUnset
	}
	return f.TailFunc(ctx, r, send)
}

// startAPI serves b over HTTP on a loopback port until the test ends and
// returns the base URL.
func startAPI(t testing.TB, b api.Backends, opts ...connect.HandlerOption) string {
	t.Helper()
	srv := httptest.NewServer(api.NewHandler(b, opts...))
	t.Cleanup(srv.Close)
	return srv.URL
}

// result is one cepctl execution.
type result struct {
	stdout, stderr string
	code           int
}

// cepctlEnv runs cepctl in process with env as its whole environment, a
// fresh home directory (so no real config file is read) and stdin.
func cepctlEnv(t testing.TB, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return cepctlCtx(context.Background(), t, env, strings.NewReader(stdin), &bytes.Buffer{}, args...)
}

// cepctlCtx is cepctlEnv with a context (cancel it for Ctrl-C), any stdin
// and an stdout to watch.
func cepctlCtx(ctx context.Context, t testing.TB, env map[string]string, stdin io.Reader, stdout interface {
	Write([]byte) (int, error)
	String() string
}, args ...string) result {
	t.Helper()
	home := t.TempDir()
	var e bytes.Buffer
	d := &deps{
		stdin:   stdin,
		stdout:  stdout,
		stderr:  &e,
		getenv:  func(k string) string { return env[k] },
		homeDir: func() (string, error) { return home, nil },
	}
	code := execute(ctx, d, args)
	return result{stdout.String(), e.String(), code}
}

// cepctl runs cepctl against the server at url.
func cepctl(t testing.TB, url string, args ...string) result {
	t.Helper()
	return cepctlEnv(t, nil, "", append([]string{"--server", url}, args...)...)
}

// mustOK fails the test unless r exited 0.
func (r result) mustOK(t testing.TB) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// mustFail fails the test unless r exited non-zero with a one-line error
// containing every want.
func (r result) mustFail(t testing.TB, want ...string) result {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("exit 0, want an error\nstdout:\n%s", r.stdout)
	}
	errLine := strings.TrimSpace(r.stderr)
	if i := strings.LastIndex(errLine, "\n"); i >= 0 {
		errLine = errLine[i+1:]
	}
	if !strings.HasPrefix(errLine, "cepctl: ") {
		t.Errorf("last stderr line %q does not start with \"cepctl: \"", errLine)
	}
	for _, w := range want {
		if !strings.Contains(errLine, w) {
			t.Errorf("error %q does not contain %q", errLine, w)
		}
	}
	return r
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers,
// which can wait for a number of lines.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines int
	wait  map[int]chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines += bytes.Count(p, []byte("\n"))
	for n, ch := range b.wait {
		if b.lines >= n {
			close(ch)
			delete(b.wait, n)
		}
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitLines returns a channel closed once n lines have been written.
func (b *syncBuffer) waitLines(n int) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	if b.lines >= n {
		close(ch)
		return ch
	}
	if b.wait == nil {
		b.wait = map[int]chan struct{}{}
	}
	b.wait[n] = ch
	return ch
}

// fields splits output into lines of whitespace-separated fields, so that
// assertions do not depend on column widths.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// hasRow reports whether some line of out has exactly the fields want.
func hasRow(out string, want ...string) bool {
	for _, r := range fields(out) {
		if strings.Join(r, " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}
