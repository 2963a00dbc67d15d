package shard

import (
	"bytes"
	"testing"

	"github.com/cepcluster/cep/snapshot"
)

// FuzzDecodeBatch: any log entry decodes or fails, never panics; what
// decodes re-encodes to the same bytes and applies without panicking.
func FuzzDecodeBatch(f *testing.F) {
	for _, b := range randomLog(1, 5) {
		f.Add(b.Encode(nil))
	}
	f.Add([]byte{batchVersion, 1, byte(OpAck), 5})
	fw := &Batch{Ops: []Op{ForwardOp{Source: "src", Target: "src.kab", Events: []Event{ev(1, "x", "A", 1)}}}}
	f.Add(fw.Encode(nil))
	skip := &Batch{Ops: []Op{SkipOp{Source: "src", Seq: 4}, SkipOp{Source: "src", Target: "src.kab", Seq: 9}}}
	f.Add(skip.Encode(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBatch(data)
		if err != nil {
			return
		}
		// an entry of the current version re-encodes to its bytes; an
		// older one to the current version's, which decodes to the same
		// batch (its fields the older version lacks at their zero)
		re := b.Encode(nil)
		if data[0] == batchVersion && !bytes.Equal(re, data) {
			t.Fatalf("re-encoding changed the entry")
		}
		if again, err := DecodeBatch(re); err != nil || !bytes.Equal(again.Encode(nil), re) {
			t.Fatalf("the re-encoded entry does not decode to itself: %v", err)
		}
		NewState(0, 15, 16).Apply(b)
	})
}

// FuzzRestoreState: a damaged snapshot is refused, never a panic.
func FuzzRestoreState(f *testing.F) {
	s := NewState(0, 15, 16)
	for _, b := range randomLog(2, 20) {
		s.Apply(b)
	}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf, snapshot.Header{ID: "s", Kind: snapshot.KindRaftSnapshot}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := snapshot.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		st, err := RestoreState([]*snapshot.Reader{r}, 0, 15)
		if err != nil {
			return
		}
		st.Apply(randomLog(3, 2)[1])
	})
}
