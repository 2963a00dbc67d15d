package meta

import (
	"bytes"
	"testing"

	"github.com/cepcluster/cep/internal/integrity"
)

// The golden log (entries written before entries were sealed) sealed
// applies to the same metadata; a damaged entry is not applied, nor
// anything after it, and no snapshot is taken: the metadata stays what
// the entries before it made.
func TestFSMRefusesDamagedEntry(t *testing.T) {
	entries := readLines(t, "testdata/entries.jsonl")
	legacy, sealed, damaged := NewFSM(), NewFSM(), NewFSM()
	var told []uint64
	damaged.OnCorrupt(func(idx uint64, err error) { told = append(told, idx) })
	bad := len(entries) / 2
	var atBad []byte
	for i, e := range entries {
		idx := uint64(i + 1)
		applyEntry(legacy, idx, e)
		applyEntry(sealed, idx, integrity.Seal(e))
		d := integrity.Seal(e)
		if i == bad {
			d[len(d)-2] ^= 0x04
			atBad = metaBytes(t, damaged)
		}
		if res := applyEntry(damaged, idx, d); i >= bad && res.Err == nil {
			t.Fatalf("entry %d at or after the damaged %d applied", idx, bad+1)
		}
	}
	if !bytes.Equal(metaBytes(t, legacy), metaBytes(t, sealed)) {
		t.Fatal("sealed entries make other metadata than the legacy ones")
	}
	if !bytes.Equal(metaBytes(t, damaged), atBad) {
		t.Fatal("the metadata changed after the damaged entry")
	}
	if len(told) != 1 || told[0] != uint64(bad+1) {
		t.Fatalf("told of %v, want entry %d once", told, bad+1)
	}
	if _, err := damaged.Snapshot(); err == nil {
		t.Fatal("a snapshot was taken after the damaged entry")
	}
	// a legacy entry that does not decode is damage too
	f := NewFSM()
	if res := applyEntry(f, 1, []byte(`{"kind":`)); res.Err == nil || f.Corrupt() == nil {
		t.Fatalf("a truncated legacy entry: %v, corrupt %v", res.Err, f.Corrupt())
	}
}

func metaBytes(t *testing.T, f *FSM) []byte {
	m, _ := f.View()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
