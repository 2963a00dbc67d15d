package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// --scale keys's events leave one partial match per key (checked by
// measureKeys against the runner's own totals) and the heap it measures
// grows with the keys.
func TestMeasureKeys(t *testing.T) {
	spec, err := readScalePattern(context.Background(), "examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := measureKeys(spec, []int{100, 2000}, "", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].PartialMatches != 2000 || rows[1].Events != 4000 {
		t.Fatalf("rows = %+v", rows)
	}
	if rows[1].HeapBytes <= rows[0].HeapBytes || rows[1].BytesPerKey <= 0 {
		t.Fatalf("heap %d bytes for 2,000 keys, %d for 100", rows[1].HeapBytes, rows[0].HeapBytes)
	}
}

// The same events through cepctl's runner give one LOGIN, one
// PAYMENT_FAILED per key in that order, inside the window: the pattern
// matches none of them (no LOGOUT) and times every key out at the end.
func TestKeyEvents(t *testing.T) {
	spec, err := readScalePattern(context.Background(), "examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	const n = 50
	var buf []byte
	for i := range 2 * n {
		buf = keyEvent(buf, i, n)
		recs, err := r.Line(buf)
		if err != nil || len(recs) != 0 {
			t.Fatalf("event %d %s: %v, %d records", i, buf, err, len(recs))
		}
	}
	timeouts := 0
	for _, rec := range r.Finish(true) {
		if rec.Type != "timeout" {
			t.Fatalf("record %+v", rec)
		}
		timeouts++
	}
	if timeouts != n {
		t.Fatalf("%d timeouts, want %d", timeouts, n)
	}
}

// Every copy of the pattern matches each key's LOGIN, failures, LOGOUT
// cycle (measurePatterns refuses any other count of matches).
func TestMeasurePatterns(t *testing.T) {
	spec, err := readScalePattern(context.Background(), "examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := measurePatterns(spec, []int{1, 4}, 800, 10, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Matches != 200 || rows[1].Matches != 800 {
		t.Fatalf("matches %d and %d, want 200 and 800", rows[0].Matches, rows[1].Matches)
	}
	if _, err := measurePatterns([]byte("stages: []\n"), []int{1}, 800, 10, quietLog()); err == nil {
		t.Fatal("a pattern without a name line accepted")
	}
}

// --scale's flags: idle runs three nodes with 32 shards unless told; bad
// modes and several patterns over a backlog are refused.
func TestScaleFlags(t *testing.T) {
	o, err := parseFlags([]string{"--scale", "idle"}, io.Discard)
	if err != nil || o.nodes != 3 || o.shards != 32 {
		t.Fatalf("--scale idle: %+v, %v", o, err)
	}
	if o, err := parseFlags([]string{"--scale", "idle", "--shards", "8"}, io.Discard); err != nil || o.shards != 8 {
		t.Fatalf("--scale idle --shards 8: %+v, %v", o, err)
	}
	for _, args := range [][]string{{"--scale", "bogus"}, {"--patterns", "2"}, {"--patterns", "0"}, {"--scale", "idle", "--idle-for", "0s"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := parseCounts("1,x", "--scale-counts"); err == nil {
		t.Error("--scale-counts 1,x accepted")
	}
}
