package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// outputStream is a pattern's output as every node serves it: records at
// sequences 1..n, a tail from any start.
func outputStream(n int) []*cepv1.Record {
	var recs []*cepv1.Record
	for i := 1; i <= n; i++ {
		recs = append(recs, &cepv1.Record{Type: "match", Id: fmt.Sprintf("r%d", i), Pattern: "p", Key: "k", Sequence: uint64(i),
			Json: fmt.Appendf(nil, `{"type":"match","id":"r%d","seq":%d}`, i, i)})
	}
	return recs
}

// from is the records of recs a request starting at r asks for.
func from(recs []*cepv1.Record, r *cepv1.TailRequest) []*cepv1.Record {
	if r.GetStart() != cepv1.TailStart_TAIL_START_SEQUENCE {
		return recs
	}
	var out []*cepv1.Record
	for _, rec := range recs {
		if rec.Sequence >= r.GetStartSequence() {
			out = append(out, rec)
		}
	}
	return out
}

// A tail whose node goes away mid-stream (the connection breaks, or the
// node ends the stream as it shuts down, though the pattern is still
// there) or answers Unavailable goes on on the next server of the list,
// from the record after the last it printed: every record is printed
// once, in order.
func TestTailResumesOnAnotherServer(t *testing.T) {
	recs := outputStream(6)
	var (
		mu   sync.Mutex
		reqs []string // "A ALL", "B 3", ...
		a, b *httptest.Server
		call = map[string]int{}
	)
	serve := func(name string, script func(n int, r *cepv1.TailRequest, send func(*cepv1.Record) error) error) *httptest.Server {
		patterns := patternDeleted // B, the last, sends to the end: the pattern was deleted
		if name == "A" {
			patterns = &fakePatterns{GetFunc: func(context.Context, *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
				return &cepv1.GetPatternResponse{Pattern: &cepv1.Pattern{Name: "p"}}, nil
			}}
		}
		return httptest.NewServer(api.NewHandler(api.Backends{Patterns: patterns, Matches: &fakeMatches{
			TailFunc: func(_ context.Context, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
				mu.Lock()
				call[name]++
				n := call[name]
				at := "ALL"
				if r.GetStart() == cepv1.TailStart_TAIL_START_SEQUENCE {
					at = fmt.Sprint(r.GetStartSequence())
				}
				reqs = append(reqs, name+" "+at)
				mu.Unlock()
				return script(n, r, send)
			},
		}}))
	}
	sendN := func(recs []*cepv1.Record, n int, send func(*cepv1.Record) error) error {
		for _, rec := range recs[:min(n, len(recs))] {
			if err := send(rec); err != nil {
				return err
			}
		}
		return nil
	}
	a = serve("A", func(n int, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		if err := sendN(from(recs, r), 2, send); err != nil {
			return err
		}
		if n == 1 {
			a.CloseClientConnections() // the node is gone mid-stream
		}
		return nil // a node shutting down ends its tails, its pattern still there
	})
	b = serve("B", func(n int, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		if n == 1 {
			return fmt.Errorf("%w: shard 1 has no leader", api.ErrUnavailable)
		}
		return sendN(from(recs, r), len(recs), send) // to the end: the pattern was deleted
	})
	defer a.Close()
	defer b.Close()

	r := cepctl(t, a.URL+","+b.URL, "tail", "p", "--from", "all", "-o", "json").mustOK(t)
	var want []string
	for _, rec := range recs {
		want = append(want, string(rec.Json))
	}
	if got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("printed\n%s\nwant each record once, in order:\n%s", r.stdout, strings.Join(want, "\n"))
	}
	// A: 1,2 then gone; B: Unavailable; A: 3,4 then ends; B: 5,6 and ends
	if got := strings.Join(reqs, ", "); got != "A ALL, B 3, A 3, B 5" {
		t.Errorf("requests %s", got)
	}
	if !strings.Contains(r.stderr, "resuming") || !strings.Contains(r.stderr, "ended (the pattern was deleted)") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// With no server to serve it, a tail gives up after tailGiveUp with one
// line saying where to resume.
func TestTailGivesUpWithoutServers(t *testing.T) {
	recs := outputStream(3)
	var a *httptest.Server
	a = httptest.NewServer(api.NewHandler(api.Backends{Matches: &fakeMatches{
		TailFunc: func(_ context.Context, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
			for _, rec := range from(recs, r)[:2] {
				if err := send(rec); err != nil {
					return err
				}
			}
			go a.Close() // the node stops for good
			a.CloseClientConnections()
			return nil
		},
	}}))
	defer a.Close()
	defer func(d time.Duration) { tailGiveUp = d }(tailGiveUp)
	tailGiveUp = time.Second
	r := cepctl(t, a.URL, "tail", "p", "--from", "all", "-o", "json").mustFail(t, "tail: no server served the stream for 1s, giving up (resume with --from 3)")
	if n := strings.Count(r.stdout, "\n"); n != 2 {
		t.Errorf("%d records printed, want 2:\n%s", n, r.stdout)
	}
}
