package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/cepcluster/cep/internal/integrity"
	"github.com/cepcluster/cep/internal/raftlog"
	"github.com/cepcluster/cep/snapshot"
)

func stateBytes(t *testing.T, f *FSM) []byte {
	var buf bytes.Buffer
	f.View(func(s *State, _ uint64) {
		if err := s.WriteSnapshot(&buf, snapshot.Header{ID: "cmp", Kind: snapshot.KindRaftSnapshot}); err != nil {
			t.Fatal(err)
		}
	})
	return buf.Bytes()
}

// A damaged entry is never applied, nor anything after it, and no
// snapshot is taken of the state that stopped there: the state stays
// what the good entries before it made (a replica that applied only
// those is the reference).
func TestFSMApplyRefusesDamagedEntry(t *testing.T) {
	log := randomLog(11, 20)
	for _, damage := range []string{"bit", "legacy-garbage", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			got, want := NewFSM(0, 15, 16, "c"), NewFSM(0, 15, 16, "c")
			var told []*raftlog.CorruptError
			got.onCorrupt = func(ce *raftlog.CorruptError) { told = append(told, ce) }
			bad := len(log) / 2
			for i, b := range log {
				data := integrity.Seal(b.Encode(nil))
				if i == bad {
					switch damage {
					case "bit":
						data[len(data)-3] ^= 0x10
					case "legacy-garbage":
						data = []byte{batchVersion, 0xff, 0xff, 0xff}
					case "truncated":
						data = data[:len(data)-1]
					}
				}
				res := got.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})
				if i < bad {
					if err, _ := res.(error); err != nil {
						t.Fatalf("entry %d: %v", i+1, err)
					}
					want.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: integrity.Seal(b.Encode(nil))})
					continue
				}
				var ce *raftlog.CorruptError
				if err, _ := res.(error); !errors.As(err, &ce) || ce.Index != uint64(bad+1) {
					t.Fatalf("entry %d after the damaged %d: Apply returned %v", i+1, bad+1, res)
				}
			}
			if len(told) != 1 || told[0].Index != uint64(bad+1) {
				t.Fatalf("OnCorrupt told %v, want entry %d once", told, bad+1)
			}
			if got.Index() != uint64(bad) {
				t.Fatalf("applied up to %d, want %d (the entry before the damaged one)", got.Index(), bad)
			}
			if !bytes.Equal(stateBytes(t, got), stateBytes(t, want)) {
				t.Fatal("the state differs from the one the entries before the damage make")
			}
			if _, err := got.Snapshot(); err == nil {
				t.Fatal("a snapshot of the stopped state was taken")
			}
		})
	}
}

// Entries written before entries were sealed are still applied.
func TestFSMAppliesLegacyEntries(t *testing.T) {
	log := randomLog(12, 10)
	legacy, sealed := NewFSM(0, 15, 16, "c"), NewFSM(0, 15, 16, "c")
	for i, b := range log {
		if err, _ := legacy.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b.Encode(nil)}).(error); err != nil {
			t.Fatal(err)
		}
		sealed.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: integrity.Seal(b.Encode(nil))})
	}
	if !bytes.Equal(stateBytes(t, legacy), stateBytes(t, sealed)) {
		t.Fatal("legacy entries make another state than sealed ones")
	}
}

// writeShardLog runs a one-replica shard over log and closes it,
// returning its directory and the index of a command entry with events
// in the middle of its log.
func writeShardLog(t *testing.T, log []*Batch) (dir string, mid uint64) {
	rs := newReplicaSet(t, 1)
	l := rs.leader()
	for _, b := range log {
		if err := l.Propose(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	last := l.Raft().LastIndex()
	l.Close()
	rs.shards[0] = nil
	return rs.dirs[0], last - uint64(len(log))/2
}

// editEntry changes the stored value of log entry index in dir's raft.db
// with edit, directly in bolt.
func editEntry(t *testing.T, dir string, index uint64, edit func(v []byte) []byte) {
	db, err := bbolt.Open(filepath.Join(dir, "raft.db"), 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := binary.BigEndian.AppendUint64(nil, index)
	if err := db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		v := b.Get(key)
		if v == nil {
			return fmt.Errorf("no entry %d", index)
		}
		return b.Put(key, edit(bytes.Clone(v)))
	}); err != nil {
		t.Fatal(err)
	}
}

func openOne(dir string) (*Shard, error) {
	_, tr := raft.NewInmemTransport("n0")
	return Open(Config{ID: 1, First: 0, Last: 15, Groups: 16, ClusterID: "c", Dir: dir, LocalID: "n0", Transport: tr, Raft: testRaftConfig()})
}

// The scan at open finds an entry edited so that it still decodes (a
// digit of an event changed, the length the same) and one overwritten
// with random bytes, naming the file and the entry; the replica is not
// opened (raft panicked on the random bytes before).
func TestOpenFindsDamagedEntry(t *testing.T) {
	for _, damage := range []string{"digit", "random"} {
		t.Run(damage, func(t *testing.T) {
			dir, mid := writeShardLog(t, randomLog(13, 30))
			editEntry(t, dir, mid, func(v []byte) []byte {
				if damage == "random" {
					rng := rand.New(rand.NewPCG(uint64(mid), 1))
					for i := range v {
						v[i] = byte(rng.Uint32())
					}
					return v
				}
				i := bytes.Index(v, []byte(`"ts":`))
				if i < 0 {
					t.Fatalf("entry %d has no event", mid)
				}
				i += len(`"ts":`)
				v[i] = '0' + (v[i]-'0'+1)%10
				return v
			})
			sh, err := openOne(dir)
			if err == nil {
				sh.Close()
				t.Fatal("the replica opened a damaged log")
			}
			var ce *raftlog.CorruptError
			if !errors.As(err, &ce) || ce.Index != mid || ce.Shard != 1 || !strings.HasSuffix(ce.File, "raft.db") {
				t.Fatalf("open: %v, want a raftlog.CorruptError for entry %d of raft.db", err, mid)
			}
			t.Log(err)
		})
	}
}

// A latest snapshot whose file is damaged fails the open (raft would
// fall back to an older state, or none, silently).
func TestOpenFindsDamagedSnapshot(t *testing.T) {
	rs := newReplicaSet(t, 1)
	l := rs.leader()
	for _, b := range randomLog(14, 20) {
		if err := l.Propose(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	rs.shards[0] = nil
	files, _ := filepath.Glob(filepath.Join(rs.dirs[0], "snapshots", "*", "state.bin"))
	if len(files) != 1 {
		t.Fatalf("snapshots %v", files)
	}
	flipByte(t, files[0], 100)
	sh, err := openOne(rs.dirs[0])
	if err == nil {
		sh.Close()
		t.Fatal("opened with a damaged snapshot")
	}
	var ce *raftlog.CorruptError
	if !errors.As(err, &ce) || ce.File != files[0] {
		t.Fatalf("open: %v, want a raftlog.CorruptError naming %s", err, files[0])
	}
}

// BenchmarkVerifyLog measures the scan at open over a log of N entries of
// about 100 events each.
func BenchmarkVerifyLog(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			store, err := raftlog.OpenLog(filepath.Join(b.TempDir(), "raft.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			var logs []*raft.Log
			for i := 1; i <= n; i++ {
				var evs []Event
				for j := 0; j < 100; j++ {
					evs = append(evs, ev(uint64(i*100+j), fmt.Sprintf("k%d", j), "A", int64(i)))
				}
				logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand,
					Data: integrity.Seal((&Batch{Ops: []Op{eventsOp(evs...)}}).Encode(nil))})
			}
			if err := store.StoreLogs(logs); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := raftlog.VerifyLog(store, CheckShardEntry); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
		})
	}
}

// flipByte inverts the byte at offset off of file.
func flipByte(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A follower that installed a snapshot keeps its trailing entries from
// before it and the entries after it, with a gap between: the start-up
// scan must not take the gap for damage (a split-off shard's replica that
// restarted was quarantined for it).
func TestVerifyLogSkipsGapsAfterASnapshot(t *testing.T) {
	store := raft.NewInmemStore()
	var logs []*raft.Log
	for _, i := range []uint64{1, 2, 3, 10, 11, 12} {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand})
	}
	if err := store.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	if i, err := raftlog.VerifyLog(store, func(l *raft.Log) error { seen = append(seen, l.Index); return nil }); err != nil {
		t.Fatalf("entry %d: %v", i, err)
	}
	if fmt.Sprint(seen) != "[1 2 3 10 11 12]" {
		t.Fatalf("checked %v, want every stored entry", seen)
	}
}
