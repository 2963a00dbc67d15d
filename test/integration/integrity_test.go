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

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelError}))
}

// editLogEntry changes, directly in bolt, the value of an entry of the
// Raft log at path that holds an event (a middle one of those), with
// edit; it returns the entry's index.
func editLogEntry(t *testing.T, path string, edit func(v []byte) []byte) uint64 {
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
			if bytes.Contains(v, []byte(`"v":`)) {
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
	tc := newPeers(t, 3, 4*time.Minute)
	logs := &logBuffer{}
	for i := range tc.cfgs {
		tc.cfgs[i].IngestBatch = 10
	}
	tc.cfgs[2].Logger = logs.logger()
	tc.startAll()
	lines := bankEvents(21, 1500)
	c := tc.client(0)
	tc.createBank(c)
	if _, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: string(lflSpec)})); err != nil {
		t.Fatal(err)
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
	if !strings.Contains(got, "quarantined") || !strings.Contains(got, file) || !strings.Contains(got, what) {
		t.Fatalf("n3's errors do not name %s and %q:\n%s", file, what, got)
	}
	t.Logf("n3 logged: %s", lastLines(got, 3))
	moved := filepath.Join(tc.cfgs[2].DataDir, "quarantine", tc.quarantined(2)[0])
	if ents, err := os.ReadDir(moved); err != nil || len(ents) == 0 {
		t.Fatalf("the quarantine directory %s holds nothing: %v", moved, err)
	}

	// rebuilt: every shard has its three voters again, the replicas are
	// identical, n3 is ready
	shards := len(tc.nodes[0].Meta().Shards)
	tc.waitPlaced([]int{0, 1, 2}, shards, 3, func(string) bool { return true }, 90*time.Second)
	tc.checkReplicasIdentical()
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error { return tc.nodes[2].Ready() })
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
