package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"pgregory.net/rapid"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"50MB": 50 << 20, "1GB": 1 << 30, "1gb": 1 << 30, "512MiB": 512 << 20, "0.5G": 1 << 29, "1000": 1000, "64K": 64 << 10, "7B": 7,
	} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "-1GB", "0", "1XB", "2TB", "NaN", "Inf"} {
		if n, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, n)
		}
	}
}

// The stall read off two scrapes of a real Prometheus histogram (the
// node's buckets) bounds the slowest observation made between them,
// whatever was observed before: checked against the largest observation
// itself.
func TestStallBetweenBoundsTheSlowest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cep_raft_apply_seconds", Help: "x", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
		reg := prometheus.NewRegistry()
		reg.MustRegister(h)
		obs := func(label string) []float64 {
			return rapid.SliceOfN(rapid.Float64Range(0, 40), 0, 30).Draw(t, label)
		}
		for _, v := range obs("before") {
			h.Observe(v)
		}
		before := parseHistogram(gather(t, reg), "cep_raft_apply_seconds")
		during := obs("during")
		for _, v := range during {
			h.Observe(v)
		}
		after := parseHistogram(gather(t, reg), "cep_raft_apply_seconds")
		if len(after) != 17 {
			t.Fatalf("%d buckets parsed, want 17", len(after))
		}
		w, err := stallBetween(before, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if int(w.Batches) != len(during) {
			t.Fatalf("batches %v, want %d", w.Batches, len(during))
		}
		if len(during) == 0 {
			if w.LongestU != 0 {
				t.Fatalf("no observation, longest %v", w.LongestU)
			}
			return
		}
		slowest, over := 0.0, 0
		for _, v := range during {
			slowest = math.Max(slowest, v)
			if v*1000 > w.OverMs {
				over++
			}
		}
		// Prometheus buckets are le: v in (lower, upper]
		if !(slowest*1000 > w.LongestL || slowest == 0 && w.LongestL == 0) || slowest*1000 > w.LongestU {
			t.Fatalf("slowest %v ms, reported in (%v, %v]", slowest*1000, w.LongestL, w.LongestU)
		}
		if w.OverMs != 64 || int(w.Over) != over {
			t.Fatalf("over %v ms: %v, want 64 ms: %d", w.OverMs, w.Over, over)
		}
	})
}

func gather(t *rapid.T, reg *prometheus.Registry) []byte {
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			cum := m.Histogram.Bucket
			for _, bk := range cum {
				fmt.Fprintf(&b, "%s_bucket{le=\"%g\"} %d\n", mf.GetName(), bk.GetUpperBound(), bk.GetCumulativeCount())
			}
			fmt.Fprintf(&b, "%s_bucket{le=\"+Inf\"} %d\n", mf.GetName(), m.Histogram.GetSampleCount())
		}
	}
	return []byte(b.String())
}

// The exposition format the node serves parses to the buckets its own
// collector reports (testutil's text encoding, not the test's).
func TestParseHistogramOfExposition(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cep_raft_apply_seconds", Help: "x", Buckets: []float64{0.001, 0.1, 1}})
	for _, v := range []float64{0.0005, 0.05, 0.05, 3} {
		h.Observe(v)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP cep_raft_apply_seconds x
# TYPE cep_raft_apply_seconds histogram
cep_raft_apply_seconds_bucket{le="0.001"} 1
cep_raft_apply_seconds_bucket{le="0.1"} 3
cep_raft_apply_seconds_bucket{le="1"} 3
cep_raft_apply_seconds_bucket{le="+Inf"} 4
cep_raft_apply_seconds_sum 3.1005
cep_raft_apply_seconds_count 4
`)); err != nil {
		t.Fatal(err)
	}
	body := []byte(`# TYPE cep_raft_apply_seconds histogram
cep_raft_apply_seconds_bucket{le="0.1"} 3
cep_raft_apply_seconds_bucket{le="0.001"} 1
cep_raft_apply_seconds_bucket{le="+Inf"} 4
cep_raft_apply_seconds_bucket{le="1"} 3
cep_raft_apply_seconds_sum 3.1005
cep_other_bucket{le="0.5"} 9
`)
	got := parseHistogram(body, "cep_raft_apply_seconds")
	want := []bucket{{0.001, 1}, {0.1, 3}, {1, 3}, {math.Inf(1), 4}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	zero := make([]bucket, len(got))
	for i := range got {
		zero[i].le = got[i].le
	}
	w, err := stallBetween(zero, got, 100)
	if err != nil {
		t.Fatal(err)
	}
	// 3 s is past the last bound: more than 1000 ms, at most +Inf
	if w.LongestL != 1000 || !math.IsInf(w.LongestU, 1) || w.Over != 1 || w.OverMs != 100 {
		t.Fatalf("window %+v", w)
	}
	// a restarted node's counts go down: not a window
	if _, err := stallBetween(got, zero, 100); err == nil {
		t.Fatal("counts going down gave no error")
	}
}

// Raft's file snapshot store, written for real, is read back: the
// snapshot's index, its creation time and its completion.
func TestSnapshotDirs(t *testing.T) {
	dir := t.TempDir()
	store, err := raft.NewFileSnapshotStore(dir, 3, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	for _, idx := range []uint64{7, 42} {
		before := time.Now().Truncate(time.Millisecond)
		sink, err := store.Create(raft.SnapshotVersionMax, idx, 3, raft.Configuration{}, 1, trans)
		if err != nil {
			t.Fatal(err)
		}
		sink.Write([]byte("state"))
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		ds := snapshotDirs(filepath.Join(dir, "snapshots"))
		last := ds[len(ds)-1]
		if last.Index != idx || last.Created.Before(before) || last.Complete.Before(last.Created.Add(-time.Second)) {
			t.Fatalf("snapshot %d read as %+v (created after %v)", idx, last, before)
		}
	}
	// one being written is not listed
	sink, err := store.Create(raft.SnapshotVersionMax, 99, 3, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Cancel()
	if ds := snapshotDirs(filepath.Join(dir, "snapshots")); len(ds) != 2 || ds[0].Index != 7 || ds[1].Index != 42 {
		t.Fatalf("listed %+v", ds)
	}
	for _, bad := range []string{"x-1-2", "1-2", "1-2-3-4", "1-a-3"} {
		if _, _, _, ok := parseSnapshotName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestStateEventSizeAndKeys(t *testing.T) {
	for _, size := range []int{100, 1024, 4096} {
		for _, login := range []bool{true, false} {
			b := stateEvent(nil, 123456, login, 1_700_000_000_000, size)
			if len(b) != size {
				t.Fatalf("size %d login %v: %d bytes", size, login, len(b))
			}
			var e map[string]any
			if err := json.Unmarshal(b, &e); err != nil || e["account"] != "s123456" {
				t.Fatalf("%s: %v %v", b, err, e)
			}
		}
	}
	// enough keys for the target, not one more than needed
	k := stateKeys(50<<20, 1024)
	if int64(k)*2048 < 50<<20 || int64(k-1)*2048 >= 50<<20 {
		t.Fatalf("%d keys of 2 KB for 50 MB", k)
	}
}

func TestLongestStalls(t *testing.T) {
	ws := []stallWindow{
		{Seconds: 10, Batches: 900, LongestU: 256},
		{Seconds: 10, Batches: 0, Encoding: []string{"n2"}}, // stopped: the whole window
		{Seconds: 10, Batches: 12, LongestU: 4096, Encoding: []string{"n1"}, Snapshot: true},
		{Seconds: 10, Batches: 800, LongestU: 512},
		{Seconds: 10.5, Batches: 0, Encoding: []string{"n1", "n3"}, Snapshot: true},
	}
	l, f, n := longestStalls(ws)
	if l != 10500 || f != 10000 || n != 512 {
		t.Fatalf("leader %v, followers %v, none %v", l, f, n)
	}
	if l, f, n := longestStalls(ws[:1]); l != -1 || f != -1 || n != 256 {
		t.Fatalf("one quiet window: %v %v %v", l, f, n)
	}
}
