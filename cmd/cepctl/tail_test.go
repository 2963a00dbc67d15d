package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

var tailRecords = []*cepv1.Record{
	{Type: "match", Id: "r1", Pattern: "login-fail", Key: "alice", Sequence: 7,
		Json: []byte(`{"type":"match","id":"r1","pattern":"login-fail","key":"alice","start":1000,"end":4000,"events":{"login":[{"user":"alice","ts":1000}],"failed":[{"ts":2000},{"ts":3000}],"logout":[{"ts":4000}]},"fields":{"n":2}}`)},
	{Type: "timeout", Id: "r2", Pattern: "login-fail", Key: "bob smith", Sequence: 8,
		Json: []byte(`{"type":"timeout","id":"r2","pattern":"login-fail","key":"bob smith","start":1500,"timeoutAt":11500,"events":{"login":[{"user":"bob smith","ts":1500}]}}`)},
	{Type: "late", Id: "r3", Pattern: "login-fail", Key: "carol", Sequence: 9,
		Json: []byte(`{"type":"late","id":"r3","pattern":"login-fail","key":"carol","event":{"user":"carol","ts":10}}`)},
}

func TestTailStreamsUntilTheEnd(t *testing.T) {
	var got *cepv1.TailRequest
	url := startAPI(t, api.Backends{Patterns: patternDeleted, Matches: &fakeMatches{
		TailFunc: func(_ context.Context, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
			got = r
			if r.GetPattern() != "login-fail" {
				return fmt.Errorf("pattern %q: %w", r.GetPattern(), api.ErrNotFound)
			}
			for _, rec := range tailRecords {
				if err := send(rec); err != nil {
					return err
				}
			}
			return nil // the pattern was deleted
		},
	}})

	r := cepctl(t, url, "tail", "login-fail", "--from", "all", "-o", "json").mustOK(t)
	if got.GetStart() != cepv1.TailStart_TAIL_START_ALL {
		t.Errorf("request %v", got)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(tailRecords) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tailRecords), r.stdout)
	}
	for i, l := range lines {
		if l != string(tailRecords[i].Json) {
			t.Errorf("line %d:\n got %s\nwant %s", i, l, tailRecords[i].Json)
		}
	}
	if !strings.Contains(r.stderr, "ended") {
		t.Errorf("stderr %q does not say the stream ended", r.stderr)
	}

	r = cepctl(t, url, "tail", "login-fail", "--from", "8").mustOK(t)
	if got.GetStart() != cepv1.TailStart_TAIL_START_SEQUENCE || got.GetStartSequence() != 8 {
		t.Errorf("request %v", got)
	}
	for _, row := range [][]string{
		{"7", "match", "alice", "r1", "1000..4000", "login×1", "failed×2", "logout×1", "{n=2}"},
		{"8", "timeout", `"bob`, `smith"`, "r2", "1500→11500", "login×1"},
		{"9", "late", "carol", "r3", `{"user":"carol","ts":10}`},
	} {
		if !hasRow(r.stdout, row...) {
			t.Errorf("no row %q in\n%s", row, r.stdout)
		}
	}

	r = cepctl(t, url, "tail", "login-fail", "-o", "yaml").mustOK(t)
	if got.GetStart() != cepv1.TailStart_TAIL_START_NEW {
		t.Errorf("request %v", got)
	}
	docs := strings.Split(strings.TrimPrefix(r.stdout, "---\n"), "---\n")
	if len(docs) != 3 {
		t.Fatalf("%d YAML documents:\n%s", len(docs), r.stdout)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(docs[1]), &m); err != nil || m["key"] != "bob smith" || m["timeoutAt"] != 11500.0 {
		t.Errorf("second document %q: %v", docs[1], err)
	}

	cepctl(t, url, "tail", "nope").mustFail(t, `pattern "nope": api: not found`)
}

// patternDeleted is a server's patterns once the tailed one is deleted.
var patternDeleted = &fakePatterns{GetFunc: func(_ context.Context, r *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
	return nil, fmt.Errorf("pattern %q: %w", r.GetName(), api.ErrNotFound)
}}

func TestTailStopsCleanlyOnInterrupt(t *testing.T) {
	cancelled := make(chan struct{})
	url := startAPI(t, api.Backends{Matches: &fakeMatches{
		TailFunc: func(ctx context.Context, _ *cepv1.TailRequest, send func(*cepv1.Record) error) error {
			for _, rec := range tailRecords[:2] {
				if err := send(rec); err != nil {
					return err
				}
			}
			<-ctx.Done() // a live tail: nothing more until the client goes
			close(cancelled)
			return ctx.Err()
		},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	go func() {
		select {
		case <-out.waitLines(2):
		case <-time.After(10 * time.Second):
		}
		cancel() // Ctrl-C
	}()
	r := cepctlCtx(ctx, t, nil, strings.NewReader(""), out, "--server", url, "tail", "login-fail", "-o", "json").mustOK(t)
	if n := strings.Count(r.stdout, "\n"); n != 2 {
		t.Errorf("%d records printed, want 2:\n%s", n, r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing on Ctrl-C", r.stderr)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the client go")
	}
}

func TestRecordSummary(t *testing.T) {
	for _, tc := range []struct{ typ, js, want string }{
		{"match", `{"type":"match","fields":{"b":"x","a":1}}`, `{a=1 b="x"}`},
		{"match", `{"start":1,"end":2,"events":{}}`, "1..2"},
		{"late", `{"event":{"a":[1, 2]}}`, `{"a":[1,2]}`},
		{"match", `not json`, "(unreadable record)"},
		{"late", `{"event":"` + strings.Repeat("x", 200) + `"}`, `"` + strings.Repeat("x", 118) + "…"},
	} {
		if got := recordSummary(tc.typ, []byte(tc.js)); got != tc.want {
			t.Errorf("recordSummary(%s) = %q, want %q", tc.js, got, tc.want)
		}
	}
}
