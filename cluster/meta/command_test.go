package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// Small universes of names, so that drawn commands meet each other.
var (
	nodeIDs    = []string{"n1", "n2", "n3", "n4"}
	sourceIDs  = []string{"s1", "s2", "s1.k", "s2.k"}
	patternIDs = []string{"p1", "p2", "p3"}
	spIDs      = []string{"sp1", "sp2"}
)

func drawStrings(t *rapid.T, label string, from []string, max int) []string {
	out := rapid.SliceOfN(rapid.SampledFrom(from), 0, max).Draw(t, label)
	if len(out) == 0 {
		return nil // omitted in the entry, so decoded as nil
	}
	return out
}

func drawPattern(t *rapid.T) Pattern {
	p := Pattern{
		Name: rapid.SampledFrom(patternIDs).Draw(t, "pattern"), Spec: rapid.StringN(0, 8, -1).Draw(t, "spec"),
		Format: rapid.SampledFrom([]string{"spec", "sql"}).Draw(t, "format"), Sources: drawStrings(t, "sources", sourceIDs[:2], 2),
		OutputSubject: "out", Policy: rapid.Uint8Range(0, 2).Draw(t, "policy"),
		MaxPartialMatches: rapid.Int64Range(-1, 3).Draw(t, "maxPM"), Records: drawStrings(t, "records", []string{"match", "timeout", "late"}, 2),
		FromStart: rapid.Bool().Draw(t, "fromStart"),
	}
	if rapid.Bool().Draw(t, "rekeyed") && len(p.Sources) > 0 {
		p.Reads = make([]string, len(p.Sources))
		for i, s := range p.Sources {
			p.Reads[i] = s + ".k"
		}
	}
	return p
}

func drawSource(t *rapid.T) Source {
	s := Source{Name: rapid.SampledFrom(sourceIDs).Draw(t, "source"), Stream: "S", Subjects: drawStrings(t, "subjects", []string{"a.*", "b.>"}, 2),
		Key: rapid.SampledFrom([]string{"", "k"}).Draw(t, "key"), Managed: rapid.Bool().Draw(t, "managed"),
		Unpartitioned: rapid.Bool().Draw(t, "unpartitioned"), Filter: drawStrings(t, "filter", []string{"a.x"}, 1)}
	if len(s.Name) > 2 {
		s.Origin = s.Name[:2]
	}
	return s
}

func drawNode(t *rapid.T) Node {
	id := rapid.SampledFrom(nodeIDs).Draw(t, "node")
	return Node{ID: id, RaftAddr: id + ":1", APIAddr: id + ":2", GossipAddr: rapid.SampledFrom([]string{"", id + ":3"}).Draw(t, "gossip")}
}

func drawSavepoint(t *rapid.T) Savepoint {
	return Savepoint{ID: rapid.SampledFrom(spIDs).Draw(t, "savepoint"), Location: "dir:///sp",
		CreatedTime: rapid.Int64Range(0, 10).Draw(t, "time"), Shards: rapid.IntRange(0, 3).Draw(t, "shards")}
}

// kinds is how many kinds drawCommandOf draws: the 15 of the switch, then
// those of moreKinds.
var kinds = 15 + len(moreKinds)

// drawCommand draws a command of any kind with the fields a proposer sets.
func drawCommand(t *rapid.T) Command {
	return drawCommandOf(t, rapid.IntRange(0, kinds-1).Draw(t, "kind"))
}

// drawCommandOf draws a command of the kind'th kind.
func drawCommandOf(t *rapid.T, kind int) Command {
	shardID := func() uint64 { return rapid.Uint64Range(1, 5).Draw(t, "shard") }
	if kind >= 15 {
		return moreKinds[kind-15](t)
	}
	switch kind {
	case 0:
		c := Init{ClusterID: "c", KeyGroups: 256, Replication: rapid.IntRange(0, 3).Draw(t, "replication"),
			Shards: []ShardInfo{{ID: 1, First: 0, Last: 127, Replicas: []string{"n1", "n2"}}, {ID: 2, First: 128, Last: 255, Replicas: []string{"n2", "n1"}}}}
		for _, id := range nodeIDs[:rapid.IntRange(1, 3).Draw(t, "nodes")] {
			c.Nodes = append(c.Nodes, Node{ID: id, RaftAddr: id + ":1", APIAddr: id + ":2"})
		}
		return c
	case 1:
		p := drawPattern(t)
		return PutPattern{Pattern: &p, Expect: rapid.Uint64Range(0, 3).Draw(t, "expect"), Create: rapid.Bool().Draw(t, "create")}
	case 2:
		return DeletePattern{Name: rapid.SampledFrom(patternIDs).Draw(t, "pattern")}
	case 3:
		s := drawSource(t)
		return PutSource{Source: &s}
	case 4:
		return DeleteSource{Name: rapid.SampledFrom(sourceIDs).Draw(t, "source")}
	case 5:
		sp := drawSavepoint(t)
		return AddSavepoint{Savepoint: &sp}
	case 6:
		return DeleteSavepoint{Name: rapid.SampledFrom(spIDs).Draw(t, "savepoint")}
	case 7:
		sp := drawSavepoint(t)
		c := RestoreSavepoint{Savepoint: &sp}
		for range rapid.IntRange(0, 2).Draw(t, "patterns") {
			c.Patterns = append(c.Patterns, drawPattern(t))
		}
		for range rapid.IntRange(0, 2).Draw(t, "sources") {
			c.Sources = append(c.Sources, drawSource(t))
		}
		return c
	case 8:
		c := PutNode{Fresh: rapid.Bool().Draw(t, "fresh"), Started: rapid.Int64Range(0, 10).Draw(t, "started")}
		if rapid.IntRange(0, 9).Draw(t, "without node") > 0 {
			nd := drawNode(t)
			c.Node = &nd
		}
		return c
	case 9:
		return RemoveNode{Name: rapid.SampledFrom(nodeIDs).Draw(t, "node"), Force: rapid.Bool().Draw(t, "force")}
	case 10:
		return ForgetNode{Name: rapid.SampledFrom(nodeIDs).Draw(t, "node"), Time: rapid.Int64Range(0, 10).Draw(t, "time")}
	case 11:
		c := SetReplicas{ShardID: shardID(), ExpectReplicas: drawStrings(t, "expect", nodeIDs, 3)}
		if rapid.Bool().Draw(t, "distinct") {
			c.Replicas = rapid.Permutation(nodeIDs).Draw(t, "replicas")[:rapid.IntRange(1, 3).Draw(t, "count")]
		} else {
			c.Replicas = drawStrings(t, "replicas", nodeIDs, 3)
		}
		return c
	case 12:
		return SplitShard{ShardID: shardID(), At: rapid.SampledFrom([]int{0, 0, 8, 64, 100, 192, 248}).Draw(t, "at")}
	case 13:
		return ForgetPattern{Name: rapid.SampledFrom(patternIDs).Draw(t, "pattern"), Expect: rapid.Uint64Range(0, 4).Draw(t, "expect")}
	default:
		return SplitDone{ShardID: shardID()}
	}
}

// What this release writes, a node of the release before decodes into its
// union struct with no field left over or missing, and this release
// decodes back to the same command.
func TestEncodingOlderNodeDecodes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seen := map[string]bool{}
		for k := range kinds {
			c := drawCommandOf(t, k)
			seen[c.Kind()] = true
			if gatedKinds[c.Kind()] {
				checkDecodes(t, c)
				continue
			}
			checkOlderNodeDecodes(t, c)
		}
		if len(seen) != len(commands)-len(versionGated) {
			t.Fatalf("drawn kinds %v, registered %d", seen, len(commands))
		}
	})
}

// checkOlderNodeDecodes checks c's entry as TestEncodingOlderNodeDecodes says.
func checkOlderNodeDecodes(t *rapid.T, c Command) {
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	var old v1Command
	if err := strictDecode(b, &old); err != nil {
		t.Fatalf("an older node cannot decode %s: %v", b, err)
	}
	if old.Kind != c.Kind() {
		t.Fatalf("an older node reads kind %q for %q", old.Kind, c.Kind())
	}
	// the older node would have proposed these very bytes
	if ob, _ := json.Marshal(&old); !bytes.Equal(ob, b) {
		t.Fatalf("an older node holds\n%s\nfor\n%s", ob, b)
	}
	d, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if db, _ := Encode(d); !bytes.Equal(db, b) {
		t.Fatalf("decoded as %#v, which encodes as\n%s\nnot\n%s", d, db, b)
	}
}

// applyResult is what the proposer of a command learns, comparable.
func applyResult(obj any, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

// A rejected command changes nothing but the applied index; a log applies
// alike directly and through its encoded entries (the encoding drops
// nothing Apply reads).
func TestApplyProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		direct, f := New(), NewFSM()
		for i := range rapid.IntRange(1, 40).Draw(t, "entries") {
			idx := uint64(i + 1)
			c := drawCommand(t)
			if sr, ok := c.(SetReplicas); ok && rapid.Bool().Draw(t, "as seen") {
				// mostly from the map the proposer saw, as proposers do
				if i := direct.ShardIndex(sr.ShardID); i >= 0 {
					sr.ExpectReplicas = direct.Shards[i].Replicas
					c = sr
				}
			}
			direct.Index = idx
			before, _ := direct.Marshal()
			obj, err := direct.Apply(idx, c)
			after, _ := direct.Marshal()
			if err != nil && !bytes.Equal(before, after) {
				t.Fatalf("entry %d %#v rejected (%v), yet changed the metadata\n%s\nto\n%s", idx, c, err, before, after)
			}
			b, eerr := Encode(c)
			if eerr != nil {
				t.Fatal(eerr)
			}
			res := applyEntry(f, idx, b)
			if got, want := applyResult(res.Obj, res.Err), applyResult(obj, err); got != want {
				t.Fatalf("entry %d %s applied from the log to %s, directly to %s", idx, b, got, want)
			}
			if logged := snapshotBytes(t, f); !bytes.Equal(logged, after) {
				t.Fatalf("entry %d %s: from the log\n%s\ndirectly\n%s", idx, b, logged, after)
			}
		}
	})
}

// An entry of a kind this release does not know is rejected as before,
// and still counts as applied.
func TestUnknownKindRejected(t *testing.T) {
	f := NewFSM()
	res := applyEntry(f, 7, []byte(`{"kind":"compactShards","shardId":1}`))
	if res.Err == nil || res.Err.Error() != `cluster: unknown metadata command "compactShards"` {
		t.Fatalf("unknown kind: %v", res.Err)
	}
	if f.meta.Index != 7 {
		t.Fatalf("index %d after the unknown entry", f.meta.Index)
	}
	res = applyEntry(f, 8, []byte(`{"kind":`))
	if res.Err == nil || f.meta.Index != 7 {
		t.Fatalf("a bad entry: %v, index %d", res.Err, f.meta.Index)
	}
	m := New()
	if _, err := m.Apply(9, &DeletePattern{Name: "p"}); err == nil || err.Error() != `cluster: not found: pattern "p"` {
		t.Fatalf("a command by pointer: %v", err)
	}
	type other struct{ Init }
	if _, err := m.Apply(10, other{}); err == nil {
		t.Fatal("a type of another kind's name applied")
	} else if want := fmt.Sprintf("cluster: metadata command %T is not a %q", other{}, "init"); err.Error() != want {
		t.Fatalf("%v, want %s", err, want)
	}
}
