package meta

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// v1Command is the single command struct every metadata log entry was
// written as, and is decoded as by a node of that release (copied from
// cluster/meta.go at e7909a6; its field types moved here unchanged but for
// their names, which JSON does not see).
type v1Command struct {
	Kind           string      `json:"kind"`
	ClusterID      string      `json:"clusterId,omitempty"`
	KeyGroups      int         `json:"keyGroups,omitempty"`
	Shards         []ShardInfo `json:"shards,omitempty"`
	Pattern        *Pattern    `json:"pattern,omitempty"`
	Name           string      `json:"name,omitempty"`
	Source         *Source     `json:"source,omitempty"`
	Savepoint      *Savepoint  `json:"savepoint,omitempty"`
	Patterns       []Pattern   `json:"patterns,omitempty"`
	Sources        []Source    `json:"sources,omitempty"`
	Expect         uint64      `json:"expect,omitempty"`
	Create         bool        `json:"create,omitempty"`
	Nodes          []Node      `json:"nodes,omitempty"`
	Replication    int         `json:"replication,omitempty"`
	Node           *Node       `json:"node,omitempty"`
	Fresh          bool        `json:"fresh,omitempty"`
	Started        int64       `json:"started,omitempty"`
	Time           int64       `json:"time,omitempty"`
	Force          bool        `json:"force,omitempty"`
	ShardID        uint64      `json:"shardId,omitempty"`
	Replicas       []string    `json:"replicas,omitempty"`
	ExpectReplicas []string    `json:"expectReplicas,omitempty"`
	At             int         `json:"at,omitempty"`
}

// goldenResult is a line of testdata/results.jsonl.
type goldenResult struct {
	Index  uint64 `json:"index"`
	Kind   string `json:"kind"`
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b, []byte("\n"))
}

type bufSink struct{ bytes.Buffer }

func (*bufSink) ID() string    { return "test" }
func (*bufSink) Cancel() error { return nil }
func (*bufSink) Close() error  { return nil }

// tb is what the helpers need of a test: testing's or rapid's.
type tb interface {
	Helper()
	Fatal(args ...any)
}

func snapshotBytes(t tb, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// applyEntry applies a log entry through the FSM, as raft does.
func applyEntry(f *FSM, idx uint64, data []byte) Result {
	res, _ := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data}).(Result)
	return res
}

// The log the release before wrote applies to the same results and the
// same metadata, byte for byte, replayed from its start or from a snapshot.
func TestGoldenLogApplies(t *testing.T) {
	entries := readLines(t, "testdata/entries.jsonl")
	results := readLines(t, "testdata/results.jsonl")
	if len(entries) != len(results) {
		t.Fatalf("%d entries, %d results", len(entries), len(results))
	}
	f := NewFSM()
	for i, e := range entries {
		idx := uint64(i + 1)
		r := goldenApply(t, f, idx, e)
		got, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, results[i]) {
			t.Errorf("entry %d applied to\n%s\nnot\n%s", idx, got, results[i])
		}
		if idx == 24 {
			if got, want := snapshotBytes(t, f), readGolden(t, "snapshot-24.json"); !bytes.Equal(got, want) {
				t.Errorf("snapshot after entry 24:\n%s\nnot\n%s", got, want)
			}
		}
	}
	want := readGolden(t, "meta.json")
	if got := snapshotBytes(t, f); !bytes.Equal(got, want) {
		t.Fatalf("metadata:\n%s\nnot\n%s", got, want)
	}
	m, err := Unmarshal(want)
	if err != nil {
		t.Fatal(err)
	}
	f.Read(func(got *Meta) {
		if !reflect.DeepEqual(got, m) {
			t.Errorf("applied metadata %+v, decoded %+v", got, m)
		}
	})

	// restored from the snapshot after entry 24, the rest of the log
	// leads to the same metadata
	g := NewFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(readGolden(t, "snapshot-24.json")))); err != nil {
		t.Fatal(err)
	}
	for i := 24; i < len(entries); i++ {
		applyEntry(g, uint64(i+1), entries[i])
	}
	if got := snapshotBytes(t, g); !bytes.Equal(got, want) {
		t.Fatalf("metadata from the snapshot:\n%s\nnot\n%s", got, want)
	}
}

// The entries of deletions with tombstones (tombstones-*: written by the
// release that added ForgetPattern) apply after the old log to the same
// results and metadata, replayed on the old log's last snapshot.
func TestGoldenTombstoneLog(t *testing.T) {
	goldenChain(t, "tombstones", "meta", uint64(len(readLines(t, "testdata/entries.jsonl"))+1))
}

var update = flag.Bool("update", false, "rewrite testdata/tombstones-results.jsonl and tombstones-meta.json from what this release applies")

// Snapshots the release before wrote decode and encode to the same bytes.
func TestGoldenSnapshotsRoundTrip(t *testing.T) {
	for _, name := range []string{"snapshot-24.json", "meta.json"} {
		b := readGolden(t, name)
		m, err := Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := m.Marshal(); !bytes.Equal(got, b) {
			t.Errorf("%s re-encodes as\n%s", name, got)
		}
		if got, _ := m.Clone().Marshal(); !bytes.Equal(got, b) {
			t.Errorf("%s clones as\n%s", name, got)
		}
	}
}

// Every kind is in the golden log, and each entry re-encodes to its own
// bytes: a node of this release proposes exactly what the release before
// did, and an older node decodes it into the union struct alike.
func TestGoldenEntriesReencode(t *testing.T) {
	seen := map[string]bool{}
	for i, e := range slices.Concat(readLines(t, "testdata/entries.jsonl"), readLines(t, "testdata/tombstones-entries.jsonl")) {
		c, err := Decode(e)
		if err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
		if _, ok := c.(unknown); ok {
			continue // no release proposes it
		}
		seen[c.Kind()] = true
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, e) {
			t.Errorf("entry %d re-encodes as\n%s\nnot\n%s", i+1, b, e)
		}
		var old, now v1Command
		if err := json.Unmarshal(e, &old); err != nil {
			t.Fatal(err)
		}
		if err := strictDecode(b, &now); err != nil {
			t.Fatalf("entry %d: an older node cannot decode %s: %v", i+1, b, err)
		}
		if !reflect.DeepEqual(old, now) {
			t.Errorf("entry %d: an older node decodes %+v, not %+v", i+1, now, old)
		}
	}
	for kind := range commands {
		if !seen[kind] && !gatedKinds[kind] && !versionGated[kind] { // those have golden files of their own, or none yet
			t.Errorf("kind %q is not in the golden log", kind)
		}
	}
}

// strictDecode decodes b into v, failing on a field v does not have.
func strictDecode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// goldenApply applies entry e at idx and returns its result as the
// golden files record it.
func goldenApply(t *testing.T, f *FSM, idx uint64, e []byte) goldenResult {
	t.Helper()
	res := applyEntry(f, idx, e)
	c, err := Decode(e)
	if err != nil {
		t.Fatalf("entry %d: %v", idx, err)
	}
	r := goldenResult{Index: idx, Kind: c.Kind(), Result: res.Obj}
	if res.Err != nil {
		r.Error = res.Err.Error()
	}
	return r
}

// The entries of sources with retention limits (limits-*: written by the
// release that added Source.Limits) apply after the tombstone log to the
// same results and metadata; a source without limits encodes as before
// (no "limits" key), limits outside their bounds are refused by every
// replica alike, and the snapshot keeps them.
func TestGoldenSourceLimits(t *testing.T) {
	want := goldenChain(t, "limits", "tombstones-meta", uint64(len(readLines(t, "testdata/entries.jsonl"))+len(readLines(t, "testdata/tombstones-entries.jsonl"))+1))
	if want == nil {
		return
	}
	m, err := Unmarshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Sources["metrics"].Limits, (SourceLimits{MaxAge: 24 * time.Hour, MaxBytes: 10 << 30, MaxMsgs: 1_000_000}); got != want {
		t.Errorf("metrics limits %+v, want %+v", got, want)
	}
	if m.Sources["audit"] != nil || m.Sources["pageviews"] != nil {
		t.Errorf("refused or deleted sources kept: %v", m.SourceNames())
	}
	if b, _ := m.Clone().Marshal(); !bytes.Equal(b, want) {
		t.Errorf("clones as\n%s", b)
	}
}

// goldenChain applies testdata/NAME-entries.jsonl after the metadata
// testdata/AFTER-meta.json holds (the log before it, of first-1 entries),
// each entry re-encoding to its bytes, and checks the results and the
// metadata against NAME-results.jsonl and NAME-meta.json (with -update,
// rewrites them); it returns the golden metadata, nil after -update.
func goldenChain(t *testing.T, name, after string, first uint64) []byte {
	t.Helper()
	entries := readLines(t, "testdata/"+name+"-entries.jsonl")
	results := readLines(t, "testdata/"+name+"-results.jsonl")
	if len(entries) != len(results) && !*update {
		t.Fatalf("%d entries, %d results", len(entries), len(results))
	}
	f := NewFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(readGolden(t, after+".json")))); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for i, e := range entries {
		c, err := Decode(e)
		if err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
		if b, _ := Encode(c); !bytes.Equal(b, e) {
			t.Errorf("entry %d re-encodes as\n%s\nnot\n%s", i+1, b, e)
		}
		b, _ := json.Marshal(goldenApply(t, f, first+uint64(i), e))
		got = append(got, b)
	}
	if *update {
		os.WriteFile("testdata/"+name+"-results.jsonl", append(bytes.Join(got, []byte("\n")), '\n'), 0o644)
		os.WriteFile("testdata/"+name+"-meta.json", append(snapshotBytes(t, f), '\n'), 0o644)
		return nil
	}
	for i := range got {
		if !bytes.Equal(got[i], results[i]) {
			t.Errorf("entry %d applied to\n%s\nnot\n%s", first+uint64(i), got[i], results[i])
		}
	}
	want := readGolden(t, name+"-meta.json")
	if b := snapshotBytes(t, f); !bytes.Equal(b, want) {
		t.Fatalf("metadata:\n%s\nnot\n%s", b, want)
	}
	return want
}
