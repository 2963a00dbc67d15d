package main

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/api/apitest"
)

// Fake backends for an in-process API server: each method calls its XxxFunc
// field, or fails with errUnset (Internal at the client) when the test left
// it nil.

// The fakes live in apitest (shared with the api package's tests).
type (
	fakePatterns   = apitest.Patterns
	fakeSources    = apitest.Sources
	fakeCluster    = apitest.Cluster
	fakeSavepoints = apitest.Savepoints
	fakeMatches    = apitest.Matches
)

var (
	_ api.PatternBackend   = (*fakePatterns)(nil)
	_ api.SourceBackend    = (*fakeSources)(nil)
	_ api.ClusterBackend   = (*fakeCluster)(nil)
	_ api.SavepointBackend = (*fakeSavepoints)(nil)
	_ api.MatchBackend     = (*fakeMatches)(nil)
)

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
