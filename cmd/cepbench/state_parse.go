package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// parseSize reads a byte count such as "50MB", "1GB", "512MiB" or "1000"
// (the decimal and binary suffixes are both powers of 1024, as cepnode's
// --max-state-bytes reads them).
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || !(n > 0) || math.IsInf(n, 0) || n*float64(mult) > 1<<40 {
		return 0, fmt.Errorf("%q is not a size in (0, 1TB] (such as 50MB or 1GB)", s)
	}
	return int64(n * float64(mult)), nil
}

// bucket is one cumulative bucket of a Prometheus histogram.
type bucket struct {
	le    float64 // upper bound, seconds; +Inf for the last
	count float64 // observations <= le
}

// parseHistogram reads the cumulative buckets of the histogram name from a
// /metrics body, sorted by bound (nil when absent).
func parseHistogram(body []byte, name string) []bucket {
	var out []bucket
	prefix := name + "_bucket{"
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		i := strings.Index(rest, `le="`)
		if i < 0 {
			continue
		}
		leText, after, ok := strings.Cut(rest[i+4:], `"`)
		if !ok {
			continue
		}
		le, err := strconv.ParseFloat(leText, 64) // "+Inf" parses to +Inf
		if err != nil {
			continue
		}
		_, val, ok := strings.Cut(after, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			continue
		}
		out = append(out, bucket{le, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// stallWindow is what the node's apply-latency histogram says of one
// window: how many ingest batches it applied and, for the slowest, the
// bucket its proposal-to-applied time fell in.
type stallWindow struct {
	Seconds  float64  `json:"seconds"`
	Batches  float64  `json:"batches"`
	LongestL float64  `json:"longest_above_ms"`   // the slowest batch took more than this
	LongestU float64  `json:"longest_at_most_ms"` // and at most this (+Inf: past the last bucket)
	Over     float64  `json:"batches_over_ms"`    // batches slower than OverMs
	OverMs   float64  `json:"over_ms"`
	Snapshot bool     `json:"leader_snapshot"` // the leader encoded a snapshot in it
	Encoding []string `json:"encoding"`        // the replicas that encoded one in it
	Leader   string   `json:"leader"`          // whose histogram: the leader at its start
	// the leadership moved during it: the histogram covers its first part
	LeaderMoved bool `json:"leader_moved"`
}

// stallBetween is the stall window of the histogram's observations between
// two scrapes: the longest is bounded by the first bucket that holds every
// new observation; over counts those above the largest bound <= overMs.
// Buckets of the two scrapes must be the same (they are one histogram).
func stallBetween(before, after []bucket, overMs float64) (stallWindow, error) {
	var w stallWindow
	if len(before) != len(after) || len(after) == 0 {
		return w, fmt.Errorf("histogram buckets differ between the scrapes (%d, %d)", len(before), len(after))
	}
	delta := make([]float64, len(after))
	for i := range after {
		if before[i].le != after[i].le {
			return w, fmt.Errorf("histogram bucket %d: le %g then %g", i, before[i].le, after[i].le)
		}
		delta[i] = after[i].count - before[i].count
		if delta[i] < 0 {
			return w, fmt.Errorf("histogram bucket le=%g went down (%g to %g): the node restarted between the scrapes", after[i].le, before[i].count, after[i].count)
		}
	}
	total := delta[len(delta)-1] // the +Inf bucket counts all
	w.Batches = total
	if total == 0 {
		return w, nil
	}
	// the first bucket that holds every observation bounds the slowest
	for i := range delta {
		if delta[i] == total {
			w.LongestU = after[i].le * 1000
			if i > 0 {
				w.LongestL = after[i-1].le * 1000
			}
			break
		}
	}
	// batches over overMs: those above the largest bound not past it
	w.OverMs = 0
	below := 0.0
	for i := range after {
		if after[i].le*1000 <= overMs {
			w.OverMs, below = after[i].le*1000, delta[i]
		}
	}
	w.Over = total - below
	return w, nil
}

// snapDir is one Raft snapshot of a shard on disk: raft's file store names
// its directory term-index-milliseconds, the time it was created (the state
// machine had encoded the state: applying waited until then), and writes
// meta.json last, when the snapshot is complete; a directory being written
// ends in ".tmp".
type snapDir struct {
	Name     string
	Index    uint64
	Created  time.Time
	Complete time.Time // meta.json's modification; zero while being written
	Bytes    int64     // state.bin's size
}

// parseSnapshotName reads raft's snapshot directory name.
func parseSnapshotName(name string) (index uint64, created time.Time, tmp bool, ok bool) {
	name, tmp = strings.CutSuffix(name, ".tmp")
	f := strings.Split(name, "-")
	if len(f) != 3 {
		return 0, time.Time{}, false, false
	}
	if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
		return 0, time.Time{}, false, false
	}
	index, err1 := strconv.ParseUint(f[1], 10, 64)
	msec, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, time.Time{}, false, false
	}
	return index, time.UnixMilli(msec), tmp, true
}

// snapshotDirs lists the complete snapshots in a shard's snapshots
// directory, oldest index first.
func snapshotDirs(dir string) []snapDir {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []snapDir
	for _, e := range ents {
		idx, created, tmp, ok := parseSnapshotName(e.Name())
		if !ok || tmp || !e.IsDir() {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		d := snapDir{Name: e.Name(), Index: idx, Created: created, Complete: fi.ModTime()}
		if st, err := os.Stat(filepath.Join(dir, e.Name(), "state.bin")); err == nil {
			d.Bytes = st.Size()
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}
