package meta

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestMetaPatternsLifecycle(t *testing.T) {
	m := New()
	m.Apply(1, Init{ClusterID: "c", KeyGroups: 256, Shards: []ShardInfo{{ID: 1, First: 0, Last: 255, Replicas: []string{"n1"}}}})
	if _, err := m.Apply(2, PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pattern on a missing source: %v", err)
	}
	if _, err := m.Apply(3, PutSource{Source: &Source{Name: "bank", Stream: "BANK"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(4, PutSource{Source: &Source{Name: "bank"}}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate source: %v", err)
	}
	res, err := m.Apply(5, PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}}})
	if err != nil || res.(*Pattern).Version != 1 || res.(*Pattern).CreatedIndex != 5 {
		t.Fatalf("deploy: %+v %v", res, err)
	}
	if _, err := m.Apply(6, PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}}}); !errors.Is(err, ErrExists) {
		t.Fatalf("second deploy with the same name: %v", err)
	}
	if _, err := m.Apply(7, PutPattern{Expect: 9, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("update from a stale version: %v", err)
	}
	res, err = m.Apply(8, PutPattern{Expect: 1, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}}})
	if err != nil || res.(*Pattern).Version != 2 || res.(*Pattern).CreatedIndex != 5 || res.(*Pattern).UpdatedIndex != 8 {
		t.Fatalf("update: %+v %v", res, err)
	}
	if _, err := m.Apply(9, DeletePattern{Name: "p"}); err != nil {
		t.Fatal(err)
	}
	if names := m.PatternNames(); len(names) != 0 {
		t.Fatalf("deleted pattern listed: %v", names)
	}
	// redeploying after a delete continues the version sequence, so shards
	// never confuse the new pattern with the old one
	res, err = m.Apply(10, PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}}})
	if err != nil || res.(*Pattern).Version != 4 {
		t.Fatalf("redeploy: %+v %v", res, err)
	}
	a, _ := m.Marshal()
	m2, err := Unmarshal(a)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m2.Marshal()
	if !bytes.Equal(a, b) {
		t.Fatal("metadata does not round-trip")
	}
}

// A source is deleted only when no pattern reads it, directly or through
// a derived source re-keying it; its derived sources go with it.
func TestMetaDeleteSource(t *testing.T) {
	m := New()
	m.Apply(1, PutSource{Source: &Source{Name: "bank", Stream: "CEP_SRC_BANK", Managed: true}})
	m.Apply(2, PutSource{Source: &Source{Name: "bank.kab12", Stream: "CEP_SRC_BANK_KAB12", Origin: "bank", Managed: true}})
	m.Apply(3, PutSource{Source: &Source{Name: "other", Stream: "OTHER"}})
	m.Apply(4, PutPattern{Create: true, Pattern: &Pattern{Name: "byuser", Sources: []string{"bank"}, Reads: []string{"bank.kab12"}}})
	m.Apply(5, PutPattern{Create: true, Pattern: &Pattern{Name: "direct", Sources: []string{"bank"}}})
	if _, err := m.Apply(6, DeleteSource{Name: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown source: %v", err)
	}
	_, err := m.Apply(7, DeleteSource{Name: "bank"})
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "pattern(s) byuser, direct") {
		t.Fatalf("a source patterns read: %v", err)
	}
	m.Apply(8, DeletePattern{Name: "direct"})
	if _, err := m.Apply(9, DeleteSource{Name: "bank"}); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "pattern(s) byuser;") {
		t.Fatalf("a source a pattern reads re-keyed: %v", err)
	}
	m.Apply(10, DeletePattern{Name: "byuser"})
	res, err := m.Apply(11, DeleteSource{Name: "bank"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.([]Source) {
		names = append(names, s.Name)
	}
	if strings.Join(names, " ") != "bank bank.kab12" || strings.Join(m.SourceNames(), " ") != "other" {
		t.Fatalf("deleted %v, left %v", names, m.SourceNames())
	}
	// a derived source of a source deleted meanwhile is refused
	if _, err := m.Apply(12, PutSource{Source: &Source{Name: "bank.kab12", Origin: "bank"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a derived source of a deleted source: %v", err)
	}
	// created again, it is a new source
	if _, err := m.Apply(13, PutSource{Source: &Source{Name: "bank", Stream: "CEP_SRC_BANK"}}); err != nil || m.Sources["bank"].CreatedIndex != 13 {
		t.Fatalf("created again: %v, %+v", err, m.Sources["bank"])
	}
}

// A pattern deployed from the start of its sources is refused when another
// pattern reads one of them (a source is read once for every pattern),
// directly or through the same derived source.
func TestMetaFromStart(t *testing.T) {
	m := New()
	m.Apply(1, PutSource{Source: &Source{Name: "bank"}})
	m.Apply(2, PutSource{Source: &Source{Name: "bank.kab12", Origin: "bank"}})
	m.Apply(3, PutPattern{Create: true, Pattern: &Pattern{Name: "direct", Sources: []string{"bank"}}})
	if _, err := m.Apply(4, PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}, FromStart: true}}); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), `pattern "direct" reads "bank"`) {
		t.Fatalf("from the start of a source another pattern reads: %v", err)
	}
	// through a derived source: the forwarder reads the origin on its own
	if _, err := m.Apply(5, PutPattern{Create: true, Pattern: &Pattern{Name: "byuser", Sources: []string{"bank"}, Reads: []string{"bank.kab12"}, FromStart: true}}); err != nil {
		t.Fatalf("from the start of a derived source nothing reads: %v", err)
	}
	if _, err := m.Apply(6, PutPattern{Create: true, Pattern: &Pattern{Name: "byuser2", Sources: []string{"bank"}, Reads: []string{"bank.kab12"}, FromStart: true}}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("from the start of a derived source another pattern reads: %v", err)
	}
	// once the other pattern is deleted it is accepted
	m.Apply(7, DeletePattern{Name: "direct"})
	if _, err := m.Apply(8, PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}, FromStart: true}}); err != nil {
		t.Fatal(err)
	}
}

func TestMetaDeleteSavepoint(t *testing.T) {
	m := New()
	for i, id := range []string{"sp-1", "sp-2", "sp-3"} {
		m.Apply(uint64(i+1), AddSavepoint{Savepoint: &Savepoint{ID: id, Location: "dir:///x"}})
	}
	res, err := m.Apply(4, DeleteSavepoint{Name: "sp-2"})
	if err != nil || res.(*Savepoint).ID != "sp-2" || len(m.Savepoints) != 2 || m.Savepoints[0].ID != "sp-1" || m.Savepoints[1].ID != "sp-3" {
		t.Fatalf("delete: %+v %v, left %+v", res, err, m.Savepoints)
	}
	if _, err := m.Apply(5, DeleteSavepoint{Name: "sp-2"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
}

// Members join, change address, are removed (only once they hold no
// replica, and for good), and shard maps change only from the map the
// proposer saw.
func TestMetaMembers(t *testing.T) {
	m := New()
	m.Apply(1, Init{ClusterID: "c", KeyGroups: 256, Replication: 3,
		Shards: []ShardInfo{{ID: 1, First: 0, Last: 255, Replicas: []string{"n1"}}},
		Nodes:  []Node{{ID: "n1", RaftAddr: "h1:1", APIAddr: "h1:2"}}})
	if m.Replication != 3 || len(m.Nodes) != 1 || m.Nodes[0].AddedIndex != 1 {
		t.Fatalf("init: %+v", m)
	}
	if _, err := m.Apply(2, RemoveNode{Name: "n1"}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("removing the last node: %v", err)
	}
	for i, id := range []string{"n3", "n2"} {
		if _, err := m.Apply(uint64(3+i), PutNode{Node: &Node{ID: id, RaftAddr: id + ":1", APIAddr: id + ":2"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.ActiveNodes(); strings.Join(got, ",") != "n1,n2,n3" {
		t.Fatalf("members not sorted: %v", got)
	}
	// a new address keeps when it joined
	if res, err := m.Apply(5, PutNode{Node: &Node{ID: "n3", RaftAddr: "x:1", APIAddr: "x:2"}}); err != nil || res.(*Node).AddedIndex != 3 || m.Node("n3").RaftAddr != "x:1" {
		t.Fatalf("address change: %+v %v", res, err)
	}
	if _, err := m.Apply(6, SetReplicas{ShardID: 1, Replicas: []string{"n1", "n2"}, ExpectReplicas: []string{"n2"}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("replicas changed from a stale map: %v", err)
	}
	for _, bad := range [][]string{nil, {"n1", "n1"}, {"n1", "n9"}} {
		if _, err := m.Apply(7, SetReplicas{ShardID: 1, Replicas: bad, ExpectReplicas: []string{"n1"}}); err == nil {
			t.Fatalf("replicas %v accepted", bad)
		}
	}
	if _, err := m.Apply(8, SetReplicas{ShardID: 1, Replicas: []string{"n1", "n2", "n3"}, ExpectReplicas: []string{"n1"}}); err != nil {
		t.Fatal(err)
	}
	// three nodes, three replicas: the two left could not hold them
	if _, err := m.Apply(9, RemoveNode{Name: "n3"}); !errors.Is(err, ErrPrecondition) || m.Node("n3").Removing {
		t.Fatalf("removing one of three nodes with three replicas: %v", err)
	}
	if _, err := m.Apply(9, RemoveNode{Name: "n3", Force: true}); err != nil || !m.Node("n3").Removing {
		t.Fatalf("remove, allowing fewer replicas: %v", err)
	}
	if got := m.ActiveNodes(); strings.Join(got, ",") != "n1,n2" {
		t.Fatalf("active: %v", got)
	}
	// a new address does not undo the removal
	m.Apply(10, PutNode{Node: &Node{ID: "n3", RaftAddr: "y:1", APIAddr: "y:2"}})
	if !m.Node("n3").Removing {
		t.Fatal("re-registering ended the removal")
	}
	if _, err := m.Apply(11, ForgetNode{Name: "n3"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("forgetting a node that holds a replica: %v", err)
	}
	m.Apply(12, SetReplicas{ShardID: 1, Replicas: []string{"n1", "n2"}, ExpectReplicas: []string{"n1", "n2", "n3"}})
	if _, err := m.Apply(13, ForgetNode{Name: "n3", Time: 5000}); err != nil || m.Node("n3") != nil || !m.IsRemoved("n3") {
		t.Fatalf("forget: %v", err)
	}
	// the removed process, still running, is not taken back; nor one that
	// started with state, or afresh but before the removal
	for _, c := range []PutNode{{}, {Started: 6000}, {Fresh: true, Started: 4000}, {Fresh: true, Started: 5000}} {
		c.Node = &Node{ID: "n3", RaftAddr: "z:1", APIAddr: "z:2"}
		if _, err := m.Apply(14, c); !errors.Is(err, ErrPrecondition) {
			t.Fatalf("a removed node taken back (fresh %v, started %d): %v", c.Fresh, c.Started, err)
		}
	}
	// a process started afresh after the removal takes the id back
	if _, err := m.Apply(15, PutNode{Node: &Node{ID: "n3", RaftAddr: "z:1", APIAddr: "z:2"}, Fresh: true, Started: 6000}); err != nil || m.IsRemoved("n3") || m.Node("n3").AddedIndex != 15 {
		t.Fatalf("a new node under a removed id: %v", err)
	}
	a, _ := m.Marshal()
	m2, _ := Unmarshal(a)
	if b, _ := m2.Marshal(); !bytes.Equal(a, b) {
		t.Fatal("metadata does not round-trip")
	}
}

// A shard splits at a block boundary inside it, one split at a time; the
// new shard has the next id and the same replicas; replicas do not move
// while it splits; the split done, the old shard keeps the lower part.
func TestMetaSplitShard(t *testing.T) {
	m := New()
	m.Apply(1, Init{ClusterID: "c", KeyGroups: 256, Replication: 2, Nodes: []Node{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}},
		Shards: []ShardInfo{{ID: 1, First: 0, Last: 127, Replicas: []string{"n1", "n2"}}, {ID: 2, First: 128, Last: 255, Replicas: []string{"n2", "n1"}}}})
	for _, c := range []struct {
		id   uint64
		at   int
		want error
	}{{9, 0, ErrNotFound}, {1, 4, ErrInvalid}, {1, 0 + 128, ErrInvalid}, {1, 0 - 8, ErrInvalid}} {
		if _, err := m.Apply(2, SplitShard{ShardID: c.id, At: c.at}); !errors.Is(err, c.want) {
			t.Fatalf("split %d at %d: %v, want %v", c.id, c.at, err, c.want)
		}
	}
	res, err := m.Apply(3, SplitShard{ShardID: 2})
	if err != nil || res.(*ShardInfo).SplitAt != 192 || res.(*ShardInfo).SplitInto != 3 {
		t.Fatalf("split shard 2 at its middle: %+v %v", res, err)
	}
	if s := m.Shards[2]; s.ID != 3 || s.First != 192 || s.Last != 255 || !s.Splitting || s.Parent != 2 || strings.Join(s.Replicas, ",") != "n2,n1" {
		t.Fatalf("new shard %+v", s)
	}
	// the range each log began with: a replica replaying one from its
	// start starts there
	if f, l := m.Shards[1].StartRange(); f != 128 || l != 255 {
		t.Fatalf("shard 2's log began with %d-%d", f, l)
	}
	if f, l := m.Shards[2].StartRange(); f != 192 || l != 255 {
		t.Fatalf("shard 3's log began with %d-%d", f, l)
	}
	if _, err := m.Apply(4, SplitShard{ShardID: 1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second split at once: %v", err)
	}
	for _, id := range []uint64{2, 3} {
		if _, err := m.Apply(5, SetReplicas{ShardID: id, Replicas: []string{"n3"}, ExpectReplicas: m.Shards[id-1].Replicas}); !errors.Is(err, ErrConflict) {
			t.Fatalf("moving the replicas of splitting shard %d: %v", id, err)
		}
	}
	if _, err := m.Apply(6, SplitDone{ShardID: 1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("done with a split that did not start: %v", err)
	}
	if _, err := m.Apply(7, SplitDone{ShardID: 2}); err != nil {
		t.Fatal(err)
	}
	if s := m.Shards[1]; s.Last != 191 || !s.Settled() || !m.Shards[2].Settled() || m.Shards[2].Parent != 2 {
		t.Fatalf("after the split: %+v %+v", s, m.Shards[2])
	}
	if f, l := m.Shards[1].StartRange(); f != 128 || l != 255 {
		t.Fatalf("after the split shard 2's log still began with 128-255, not %d-%d", f, l)
	}
	// a shard of one block (8 key groups) cannot split
	m.Apply(8, SplitShard{ShardID: 3, At: 248})
	m.Apply(9, SplitDone{ShardID: 3})
	if _, err := m.Apply(10, SplitShard{ShardID: 4}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("splitting a one-block shard: %v", err)
	}
	// which shard forwards a derived source after the split: cluster's
	// TestForwarderAfterSplit
}

// An entry without the object its kind needs is refused like any invalid
// command: every replica would otherwise panic applying it, and again on
// every replay of the log.
func TestCommandsWithoutTheirObjectAreRefused(t *testing.T) {
	for _, c := range []Command{PutPattern{}, PutSource{}, RestoreSavepoint{}, AddSavepoint{}} {
		m := New()
		before, _ := m.Marshal()
		_, err := m.Apply(7, c)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s without its object: %v", c.Kind(), err)
		}
		m.Index = 0
		if after, _ := m.Marshal(); string(after) != string(before) {
			t.Errorf("%s changed the metadata: %s", c.Kind(), after)
		}
	}
}

// Deploying and deleting a big pattern again and again leaves the
// metadata about its size without the pattern: a deletion keeps a
// tombstone (name, version, the deletion), a re-deploy replaces it, and
// ForgetPattern removes it. Versions keep counting across all of it.
func TestTombstonesKeepMetadataSmall(t *testing.T) {
	m := New()
	m.Apply(1, Init{ClusterID: "c", KeyGroups: 256, Shards: []ShardInfo{{ID: 1, First: 0, Last: 255, Replicas: []string{"n1"}}}})
	m.Apply(2, PutSource{Source: &Source{Name: "bank", Stream: "BANK"}})
	size := func() int {
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	start := size()
	big := "name: big\nsource: bank\n# " + strings.Repeat("x", 64<<10) + "\n"
	idx := uint64(2)
	var last uint64
	for i := range 200 {
		idx++
		res, err := m.Apply(idx, PutPattern{Create: true, Pattern: &Pattern{Name: "big", Spec: big, Sources: []string{"bank"}, OutputSubject: "cep.out.big"}})
		if err != nil {
			t.Fatalf("deploy %d: %v", i, err)
		}
		if v := res.(*Pattern).Version; v <= last {
			t.Fatalf("deploy %d: version %d after %d", i, v, last)
		}
		if size() < start+len(big) {
			t.Fatalf("deploy %d: the metadata does not hold the spec", i)
		}
		idx++
		res, err = m.Apply(idx, DeletePattern{Name: "big"})
		if err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
		if d := res.(*Pattern); d.Spec != big || !d.Deleted {
			t.Fatalf("delete %d returned %+v, not the deleted pattern", i, d)
		}
		last = res.(*Pattern).Version
		if got := size(); got > start+256 {
			t.Fatalf("after %d deploy/delete cycles the metadata is %d bytes, %d at the start", i+1, got, start)
		}
		if p := m.Patterns["big"]; p == nil || !p.Deleted || p.Version != last {
			t.Fatalf("tombstone after cycle %d: %+v", i, p)
		}
	}
	// forgotten once every shard applied the deletion; a stale forget is refused
	idx++
	if _, err := m.Apply(idx, ForgetPattern{Name: "big", Expect: last - 2}); !errors.Is(err, ErrConflict) {
		t.Fatalf("forget of an older version: %v", err)
	}
	idx++
	if _, err := m.Apply(idx, ForgetPattern{Name: "big", Expect: last}); err != nil {
		t.Fatal(err)
	}
	if m.Patterns["big"] != nil || size() > start+32 {
		t.Fatalf("after the forget: %+v, %d bytes (%d at the start)", m.Patterns["big"], size(), start)
	}
	// a re-deploy, and a pattern new to the cluster, count on above it: no
	// record id of the deleted versions comes again
	for _, name := range []string{"big", "other"} {
		idx++
		res, err := m.Apply(idx, PutPattern{Create: true, Pattern: &Pattern{Name: name, Spec: "x", Sources: []string{"bank"}}})
		if err != nil || res.(*Pattern).Version != last+1 {
			t.Fatalf("deploy of %s after the forget: %+v %v, want version %d", name, res, err, last+1)
		}
	}
	idx++
	if _, err := m.Apply(idx, ForgetPattern{Name: "big", Expect: last + 1}); !errors.Is(err, ErrConflict) {
		t.Fatalf("forget of a deployed pattern: %v", err)
	}
}

// A restore logs the positions mapped onto other streams with the restore
// the shards act on, and the sources' stream identity becomes the one the
// proposer found: a source the cluster has takes it when its stream is
// the same by name, a new one is added with it.
func TestMetaRestoreMapsPositions(t *testing.T) {
	m := New()
	m.Apply(1, PutSource{Source: &Source{Name: "bank", Stream: "CEP_SRC_BANK", Managed: true, StreamCreated: 100}})
	m.Apply(2, PutSource{Source: &Source{Name: "other", Stream: "OTHER", StreamCreated: 5}})
	res, err := m.Apply(3, RestoreSavepoint{Savepoint: &Savepoint{ID: "sp-1", Location: "dir://x"},
		Sources: []Source{
			{Name: "bank", Stream: "CEP_SRC_BANK", Managed: true, StreamCreated: 200},
			{Name: "other", Stream: "ELSEWHERE", StreamCreated: 7},
			{Name: "new", Stream: "CEP_SRC_NEW", StreamCreated: 300},
		},
		Positions: map[string]uint64{"bank": 0, "new": 12}, Forwarded: map[string]uint64{"bank.kx": 3}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.(*Restore)
	if r.ID != "sp-1@3" || len(r.Positions) != 2 || r.Positions["new"] != 12 || r.Forwarded["bank.kx"] != 3 {
		t.Fatalf("restore %+v", r)
	}
	if got := m.Sources["bank"].StreamCreated; got != 200 {
		t.Errorf("bank's stream identity %d, want the one found at the restore (200)", got)
	}
	if got := m.Sources["other"]; got.Stream != "OTHER" || got.StreamCreated != 5 {
		t.Errorf("a source of another stream changed: %+v", got)
	}
	if got := m.Sources["new"]; got == nil || got.StreamCreated != 300 || got.CreatedIndex != 3 {
		t.Errorf("added source %+v", got)
	}
	// the mapping is part of the metadata every node holds (snapshots too)
	b, _ := m.Marshal()
	back, err := Unmarshal(b)
	if err != nil || back.Restore.Positions["new"] != 12 || back.Sources["bank"].StreamCreated != 200 {
		t.Fatalf("round trip: %v %+v", err, back.Restore)
	}
}

// A refusal a retry cannot change is a precondition whose text says what
// to do, never that the metadata changed concurrently; only a lost race
// (an expected version that moved) is a conflict, which says to retry.
func TestRefusalsSayWhetherToRetry(t *testing.T) {
	m := New()
	m.Apply(1, Init{ClusterID: "c", KeyGroups: 256, Replication: 1,
		Shards: []ShardInfo{{ID: 1, First: 0, Last: 7, Replicas: []string{"n1"}}, {ID: 2, First: 8, Last: 255, Replicas: []string{"n1"}}},
		Nodes:  []Node{{ID: "n1", RaftAddr: "h1:1", APIAddr: "h1:2"}}})
	m.Apply(2, PutSource{Source: &Source{Name: "bank"}})
	m.Apply(3, PutPattern{Create: true, Pattern: &Pattern{Name: "fraud", Sources: []string{"bank"}}})
	for _, tc := range []struct {
		what string
		cmd  Command
		kind error
		want string
	}{
		{"delete a source a pattern reads", DeleteSource{Name: "bank"}, ErrPrecondition, `source "bank" is read by pattern(s) fraud; delete them first`},
		{"remove the last node", RemoveNode{Name: "n1"}, ErrPrecondition, `node "n1" is the cluster's last; its replicas have nowhere to go: add a node first`},
		{"split a one-block shard", SplitShard{ShardID: 1}, ErrPrecondition, "it cannot split further"},
		{"start from the start of a source read", PutPattern{Create: true, Pattern: &Pattern{Name: "p", Sources: []string{"bank"}, FromStart: true}}, ErrPrecondition, `pattern "fraud" reads "bank" already`},
		{"update from a stale version", PutPattern{Expect: 7, Pattern: &Pattern{Name: "fraud", Sources: []string{"bank"}}}, ErrConflict, "changed concurrently; retry: pattern \"fraud\" is at version 1"},
	} {
		_, err := m.Apply(4, tc.cmd)
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v containing %q", tc.what, err, tc.kind, tc.want)
		}
		if tc.kind == ErrPrecondition && strings.Contains(err.Error(), "retry") {
			t.Errorf("%s: %q tells to retry what a retry cannot change", tc.what, err)
		}
	}
}

// A forget written per name (by a release whose every member applies it
// so) lets that name's versions go on above it and leaves other names
// alone: a pattern new to the cluster starts at version 1 however many
// were deleted before. The older command keeps its meaning, for logs
// written before: every name above it.
func TestForgetPerName(t *testing.T) {
	for _, perName := range []bool{false, true} {
		m := New()
		idx := uint64(0)
		apply := func(c Command) any {
			t.Helper()
			idx++
			res, err := m.Apply(idx, c)
			if err != nil {
				t.Fatalf("per name %v: %T: %v", perName, c, err)
			}
			return res
		}
		apply(PutSource{Source: &Source{Name: "bank", Stream: "CEP_SRC_BANK", Subjects: []string{"bank.*"}, Key: "account"}})
		for range 3 {
			apply(PutPattern{Create: true, Pattern: &Pattern{Name: "old", Spec: "x", Sources: []string{"bank"}}})
			apply(DeletePattern{Name: "old"})
		}
		gone := m.Patterns["old"].Version // 6: three deployments, three deletions
		apply(ForgetPattern{Name: "old", Expect: gone, PerName: perName})
		fresh := apply(PutPattern{Create: true, Pattern: &Pattern{Name: "fresh", Spec: "x", Sources: []string{"bank"}}}).(*Pattern)
		again := apply(PutPattern{Create: true, Pattern: &Pattern{Name: "old", Spec: "x", Sources: []string{"bank"}}}).(*Pattern)
		wantFresh := gone + 1
		if perName {
			wantFresh = 1
		}
		if fresh.Version != wantFresh || again.Version != gone+1 {
			t.Errorf("per name %v: after forgetting old at %d, fresh is at version %d (want %d), old again at %d (want %d)",
				perName, gone, fresh.Version, wantFresh, again.Version, gone+1)
		}
	}
}
