package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
)

// logBuffer keeps what a node logs at error level, for the tests to look
// for the line naming a damaged file.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) loggerAt(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}

// editLogEntry changes, directly in bolt, the value of an entry of the
// Raft log at path that holds an event (a middle one of those), with
// edit; it returns the entry's index.
func editLogEntry(t *testing.T, path string, edit func(v []byte) []byte) uint64 {
	return editLogEntryWith(t, path, []byte(`"v":`), edit)
}

// editLogEntryWith is editLogEntry for an entry holding match.
func editLogEntryWith(t *testing.T, path string, match []byte, edit func(v []byte) []byte) uint64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var index uint64
	if err := db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		var withEvents [][]byte
		b.ForEach(func(k, v []byte) error {
			if bytes.Contains(v, match) {
				withEvents = append(withEvents, bytes.Clone(k))
			}
			return nil
		})
		if len(withEvents) == 0 {
			return fmt.Errorf("%s: no entry holds an event", path)
		}
		k := withEvents[len(withEvents)/2]
		index = binary.BigEndian.Uint64(k)
		return b.Put(k, edit(bytes.Clone(b.Get(k))))
	}); err != nil {
		t.Fatal(err)
	}
	return index
}

// changeAmount changes the first digit of the first amount ("v") in v,
// leaving its length and every other byte as they are: the entry still
// decodes.
func changeAmount(v []byte) []byte {
	i := bytes.Index(v, []byte(`"v":`)) + len(`"v":`)
	v[i] = '0' + (v[i]-'0'+1)%10
	return v
}

// overwriteRandomly overwrites v with random bytes.
func overwriteRandomly(v []byte) []byte {
	rng := rand.New(rand.NewPCG(uint64(len(v)), 9))
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	return v
}

// flipFileByte inverts a byte in the middle of file.
func flipFileByte(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// quarantined lists the directories moved under node i's quarantine.
func (tc *testCluster) quarantined(i int) []string {
	ents, _ := os.ReadDir(filepath.Join(tc.cfgs[i].DataDir, "quarantine"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// damageAndRebuild runs three nodes with events flowing, stops n3,
// damages its files with damage (given n3's data directory; it returns
// the file the error must name) and starts it again: n3 comes up, the
// damaged replica is quarantined (files moved aside, an error naming the
// file and shard) and rebuilt from the others, the replicas end
// identical, and the output is the offline engine's, nothing more.
func damageAndRebuild(t *testing.T, before func(n *cluster.Node), damage func(dir string) (file, what string)) {
	var tc *testCluster
	damageAndRebuildOn(t, &tc, before, damage)
}

// damageAndRebuildOn is damageAndRebuild, leaving the cluster in *out for
// further checks.
func damageAndRebuildOn(t *testing.T, out **testCluster, before func(n *cluster.Node), damage func(dir string) (file, what string)) {
	tc := newPeers(t, 3, 4*time.Minute)
	*out = tc
	logs, others := &logBuffer{}, &logBuffer{}
	for i := range tc.cfgs {
		tc.cfgs[i].IngestBatch = 10
		tc.cfgs[i].Logger = others.loggerAt(slog.LevelInfo)
	}
	tc.cfgs[2].Logger = logs.loggerAt(slog.LevelInfo)
	t.Cleanup(func() {
		if t.Failed() {
			// what the nodes said, for the failure's reader
			os.WriteFile(filepath.Join(os.TempDir(), t.Name()+"-n3.log"), []byte(logs.String()), 0o644)
			os.WriteFile(filepath.Join(os.TempDir(), t.Name()+"-n1n2.log"), []byte(others.String()), 0o644)
		}
	})
	tc.startAll()
	lines := bankEvents(21, 1500)
	c := tc.client(0)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if tc.nodes[0].MetaLeader() == "" {
			return fmt.Errorf("no metadata leader")
		}
		return nil
	})
	tc.createBank(c)
	// amountsSpec holds every event in its state for good: a replica that
	// applied an edited amount holds another state
	for _, spec := range []string{string(lflSpec), amountsSpec} {
		if _, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: spec})); err != nil {
			t.Fatal(err)
		}
	}
	bank := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	tc.publish("bank", bank, lines[:600])
	tc.checkReplicasIdentical()
	if before != nil {
		before(tc.nodes[2])
	}
	if err := tc.stop(2); err != nil {
		t.Fatal(err)
	}
	tc.publish("bank", bank, lines[600:1000])
	file, what := damage(tc.cfgs[2].DataDir)
	tc.start(2)
	tc.publish("bank", bank, lines[1000:])

	// quarantined: the files moved, the error names the file and what
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if len(tc.quarantined(2)) == 0 {
			return fmt.Errorf("nothing moved under %s", filepath.Join(tc.cfgs[2].DataDir, "quarantine"))
		}
		return nil
	})
	got := logs.String()
	if !strings.Contains(got, "level=ERROR msg=\"replica quarantined") && !strings.Contains(got, "level=ERROR msg=\"metadata replica quarantined") ||
		!strings.Contains(got, file) || !strings.Contains(got, what) {
		t.Fatalf("n3's errors do not name %s and %q:\n%s", file, what, got)
	}
	t.Logf("n3 logged: %s", lastLines(got, 3))
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, "quarantined") {
			t.Logf("n3: %s", l)
		}
	}
	moved := filepath.Join(tc.cfgs[2].DataDir, "quarantine", tc.quarantined(2)[0])
	if ents, err := os.ReadDir(moved); err != nil || len(ents) == 0 {
		t.Fatalf("the quarantine directory %s holds nothing: %v", moved, err)
	}

	// rebuilt: n3 is ready (no replica quarantined) and holds every
	// shard, each has its three voters again, the replicas are identical
	shards := len(tc.nodes[0].Meta().Shards)
	testutil.EventuallyEvery(t, 90*time.Second, poll, func() error {
		if got := len(tc.nodes[2].Shards()); got != shards {
			return fmt.Errorf("n3 holds %d replicas of %d shards", got, shards)
		}
		return tc.nodes[2].Ready()
	})
	tc.waitPlaced([]int{0, 1, 2}, shards, 3, func(string) bool { return true }, 90*time.Second)
	// by way of a non-voter: the leader demoted it before it opened empty
	if !strings.Contains(others.String(), "made a non-voter until it is rebuilt") {
		t.Fatalf("no leader demoted n3's quarantined replica:\n%s", lastLines(others.String(), 20))
	}
	tc.checkReplicasIdentical()
	if n, ok := tc.metricValue(2, "cep_shard_quarantined"); ok && n != 0 {
		t.Fatalf("cep_shard_quarantined %v after the rebuild", n)
	}

	tc.sameAsOffline("lfl", lflSpec, lines)
	want := tc.outputCount("cep.out.lfl")
	time.Sleep(time.Second) // a late publication of what never was would show now
	if n := tc.outputCount("cep.out.lfl"); n != want {
		t.Fatalf("%d records published, then %d", want, n)
	}
}

// amountsSpec keeps a partial match of every event, waiting for ever
// for an event that never comes: the state at rest holds every amount.
const amountsSpec = `name: amounts
source: bank
key: e.account
time: e.ts
stages:
  - name: any
    where: e.v >= 0
  - name: never
    where: e.type == "NEVER"
`

// shard1Log is shard 1's log in a node's data directory.
func shard1Log(dir string) string { return filepath.Join(dir, "shards", "1", "raft.db") }

// An event of a stored entry edited so that it still decodes (a digit
// of an amount) is found by its checksum, not applied.
func TestIntegrityEditedEntry(t *testing.T) {
	damageAndRebuild(t, nil, func(dir string) (string, string) {
		i := editLogEntry(t, shard1Log(dir), changeAmount)
		return shard1Log(dir), fmt.Sprintf("shard 1: %s: log entry %d", shard1Log(dir), i)
	})
}

// Random bytes over an entry of one shard's log: raft panicked in
// NewRaft on every start; now that replica alone is quarantined.
func TestIntegrityRandomBytes(t *testing.T) {
	damageAndRebuild(t, nil, func(dir string) (string, string) {
		i := editLogEntry(t, shard1Log(dir), overwriteRandomly)
		return shard1Log(dir), fmt.Sprintf("log entry %d", i)
	})
}

// A damaged latest snapshot is not restored (raft would go back to an
// older state, or fail the start).
func TestIntegrityDamagedSnapshot(t *testing.T) {
	damageAndRebuild(t, func(n *cluster.Node) {
		for _, sh := range n.Shards() {
			if sh.ID() == 1 {
				if err := sh.Raft().Snapshot().Error(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}, func(dir string) (string, string) {
		files, _ := filepath.Glob(filepath.Join(dir, "shards", "1", "snapshots", "*", "state.bin"))
		if len(files) == 0 {
			t.Fatal("no snapshot of shard 1")
		}
		flipFileByte(t, files[len(files)-1])
		return files[len(files)-1], "shard 1"
	})
}

// A single node whose shard 1 log is damaged starts; shard 1 stops, with
// the error in the status, /readyz and the metrics, and publishes
// nothing; shard 2 works on.
func TestIntegritySingleNodeShardStops(t *testing.T) {
	base := t.TempDir()
	cfg := cluster.Config{Shards: 2, DataDir: filepath.Join(base, "n1"), IngestBatch: 10}
	tc := newSingle(t, 2*time.Minute, cfg)
	c := tc.client(0)
	tc.createBank(c)
	if _, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: string(lflSpec)})); err != nil {
		t.Fatal(err)
	}
	m := tc.nodes[0].Meta()
	inShard := func(account string) uint64 {
		kg := keygroup.OfKey(account, m.KeyGroups)
		for _, s := range m.Shards {
			if kg >= s.First && kg <= s.Last {
				return s.ID
			}
		}
		return 0
	}
	var one, two []string
	for _, l := range bankEvents(22, 1500) {
		acc := l[strings.Index(l, `"account":"`)+11:]
		acc = acc[:strings.IndexByte(acc, '"')]
		if inShard(acc) == 1 {
			one = append(one, l)
		} else {
			two = append(two, l)
		}
	}
	bank := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	// shard 1's events end before a match can: nothing published of them
	var noise []string
	for _, l := range one[:50] {
		noise = append(noise, strings.NewReplacer(`"LOGIN"`, `"NOISE"`, `"LOGOUT"`, `"NOISE"`).Replace(l))
	}
	tc.publish("bank", bank, noise)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if n := tc.metric(0, "cep_events_total", `shard="1"`); n < float64(len(noise)) {
			return fmt.Errorf("shard 1 applied %v of %d events", n, len(noise))
		}
		return nil
	})
	if err := tc.stop(0); err != nil {
		t.Fatal(err)
	}
	logFile := shard1Log(tc.cfgs[0].DataDir)
	editLogEntry(t, logFile, changeAmount)
	tc.start(0)
	c = tc.client(0)
	tc.publish("bank", bank, two)

	st, err := c.cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Msg.Shards {
		if (s.Id == 1) != (s.Quarantined != "") {
			t.Fatalf("shard %d: quarantined %q", s.Id, s.Quarantined)
		}
		if s.Id == 1 && (!strings.Contains(s.Quarantined, logFile) || !strings.Contains(s.Quarantined, "shard 1")) {
			t.Fatalf("the status says %q, naming neither %s nor shard 1", s.Quarantined, logFile)
		}
	}
	// (once the metadata is in: before, it says that)
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		res, err := http.Get("http://" + tc.nodes[0].APIAddr() + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "shard 1 is quarantined") || !strings.Contains(string(body), logFile) {
			return fmt.Errorf("/readyz: %d %s", res.StatusCode, body)
		}
		return nil
	})
	if q := tc.metric(0, "cep_shard_quarantined", `shard="1"`); q != 1 {
		t.Fatalf("cep_shard_quarantined{shard=\"1\"} = %v", q)
	}
	// shard 2's output is the offline engine's over its events, and
	// nothing else is published
	tc.sameAsOffline("lfl", lflSpec, two)
	want := tc.outputCount("cep.out.lfl")
	time.Sleep(time.Second)
	if n := tc.outputCount("cep.out.lfl"); n != want {
		t.Fatalf("%d records published, then %d", want, n)
	}
	// and it stays stopped across a restart
	tc.restartNotReady(0)
	if q := tc.metric(0, "cep_shard_quarantined", `shard="1"`); q != 1 {
		t.Fatalf("after a restart, cep_shard_quarantined{shard=\"1\"} = %v", q)
	}
}

// restartNotReady stops node i and starts it again without waiting for
// it to be ready.
func (tc *testCluster) restartNotReady(i int) {
	tc.t.Helper()
	tc.stop(i)
	tc.start(i)
}

// A damaged entry of the metadata log: the metadata replica is
// quarantined and rebuilt from the others (a non-voter until it has
// caught up), the node's shard replicas untouched.
func TestIntegrityDamagedMetaLog(t *testing.T) {
	var tc *testCluster
	damageAndRebuildOn(t, &tc, nil, func(dir string) (string, string) {
		file := filepath.Join(dir, "meta", "raft.db")
		i := editLogEntryWith(t, file, []byte(`"kind":"`), func(v []byte) []byte {
			j := bytes.Index(v, []byte(`"kind":"`)) + len(`"kind":"`)
			v[j] ^= 0x20 // a letter's case: still JSON, the same length
			return v
		})
		return file, fmt.Sprintf("%s: log entry %d", file, i)
	})
	// the metadata replicas agree, and n3 votes in the metadata group again
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		var want []byte
		for i, n := range tc.nodes {
			b, err := n.Meta().Marshal()
			if err != nil {
				return err
			}
			if i > 0 && !bytes.Equal(b, want) {
				return fmt.Errorf("n%d's metadata differs from n1's", i+1)
			}
			want = b
		}
		return nil
	})
	if q, _ := tc.metricValue(2, "cep_meta_quarantined"); q != 0 {
		t.Fatalf("cep_meta_quarantined %v after the rebuild", q)
	}
	if !strings.HasPrefix(tc.quarantined(2)[0], "meta-") {
		t.Fatalf("moved %v, want the metadata replica's files", tc.quarantined(2))
	}
}

// A single node whose metadata log is damaged has no peer to rebuild it
// from: it does not start, the error naming the file and the entry, and
// the files stay where they are.
func TestIntegritySingleNodeMetaLog(t *testing.T) {
	tc := newSingle(t, time.Minute, cluster.Config{DataDir: filepath.Join(t.TempDir(), "n1")})
	tc.createBank(tc.client(0))
	if err := tc.stop(0); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tc.cfgs[0].DataDir, "meta", "raft.db")
	i := editLogEntryWith(t, file, []byte(`"kind":"`), func(v []byte) []byte {
		j := bytes.Index(v, []byte(`"kind":"`)) + len(`"kind":"`)
		v[j] ^= 0x20
		return v
	})
	n, err := cluster.Start(tc.ctx, tc.withSecret(tc.cfgs[0]))
	if err == nil {
		n.Close()
		t.Fatal("the node started with a damaged metadata log")
	}
	if want := fmt.Sprintf("metadata group: %s: log entry %d", file, i); !strings.Contains(err.Error(), want) {
		t.Fatalf("start: %v, want it to say %q", err, want)
	}
	t.Log(err)
	if _, err := os.Stat(file); err != nil || len(tc.quarantined(0)) != 0 {
		t.Fatalf("the files moved (%v, quarantine %v): a single node keeps them", err, tc.quarantined(0))
	}
}
