package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// deadURL is the address of a listener that was closed: a connection to
// it is refused.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// Given several servers, a command whose first server is down is served
// by the next, and later calls go straight there; given one dead server
// only, it fails naming it.
func TestCommandFailsOverToTheNextServer(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	live := startAPI(t, api.Backends{Patterns: &fakePatterns{
		ListFunc: func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
			mu.Lock()
			calls++
			mu.Unlock()
			return &cepv1.ListPatternsResponse{Patterns: []*cepv1.Pattern{samplePattern("p1", 2, cepv1.PatternState_PATTERN_STATE_ACTIVE)}}, nil
		},
	}})
	dead := deadURL(t)
	out := cepctl(t, dead+","+live, "pattern", "list").mustOK(t).stdout
	if !strings.Contains(out, "p1") || calls != 1 {
		t.Fatalf("pattern list with the first server down: %q after %d calls", out, calls)
	}
	r := cepctl(t, dead, "pattern", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot reach the server at "+dead) {
		t.Fatalf("one dead server: exit %d, %q", r.code, r.stderr)
	}
	r = cepctl(t, dead+","+deadURL(t), "pattern", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot reach the server at any of "+dead) {
		t.Fatalf("every server dead: exit %d, %q", r.code, r.stderr)
	}
}

// The transport sends a call to the next server only when the connection
// could not be made, with its body whole, and stays with the server that
// answered; a call a server answered, even with an error, is not sent on.
func TestFailoverTransport(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	handler := func(name string, status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got[name] = append(got[name], r.URL.Path+" "+string(b))
			mu.Unlock()
			w.WriteHeader(status)
		})
	}
	a := httptest.NewServer(handler("a", http.StatusOK))
	defer a.Close()
	b := httptest.NewServer(handler("b", http.StatusServiceUnavailable))
	defer b.Close()
	dead := deadURL(t)

	hc := &http.Client{Transport: newFailover(nil, []string{dead, a.URL, b.URL})}
	for i := range 3 {
		res, err := hc.Post(dead+"/svc/Call", "application/proto", bytes.NewReader([]byte(fmt.Sprint("body", i))))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if want := []string{"/svc/Call body0", "/svc/Call body1", "/svc/Call body2"}; fmt.Sprint(got["a"]) != fmt.Sprint(want) || len(got["b"]) != 0 {
		t.Fatalf("calls: %v, want every call on a whole: %v", got, want)
	}

	got = map[string][]string{}
	hc = &http.Client{Transport: newFailover(nil, []string{b.URL, a.URL})}
	res, err := hc.Post(b.URL+"/svc/Call", "application/proto", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || len(got["a"]) != 0 {
		t.Fatalf("a call b answered with %d was sent on: %v", res.StatusCode, got)
	}
}
